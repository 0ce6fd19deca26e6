#include "util/cpu.h"

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int probe_avx2(void)
{
	/* F16C through cpuid: clang's __builtin_cpu_supports does not know it. */
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C))
		return 0;
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* Asked once: cpuid exits to the hypervisor on a virtual machine, too dear
 * for every product. Threads racing on the first call store the same value,
 * atomically. */
int infs__cpu_avx2(void)
{
	static atomic_int known = -1;
	int v = atomic_load_explicit(&known, memory_order_relaxed);
	if (v < 0) {
		v = probe_avx2();
		atomic_store_explicit(&known, v, memory_order_relaxed);
	}
	return v;
}
#else
int infs__cpu_avx2(void)
{
	return 0;
}
#endif
