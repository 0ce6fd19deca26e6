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
static int asked_once(atomic_int *known, int (*probe)(void))
{
	int v = atomic_load_explicit(known, memory_order_relaxed);
	if (v < 0) {
		v = probe();
		atomic_store_explicit(known, v, memory_order_relaxed);
	}
	return v;
}

int infs__cpu_avx2(void)
{
	static atomic_int known = -1;
	return asked_once(&known, probe_avx2);
}

static int probe_avx512_vnni(void)
{
	unsigned a, b, c, d;
	if (!probe_avx2() || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	const int cpu = (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_AVX512VNNI);
	if (!cpu || !__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return 0;
	/* XCR0: the SSE, AVX, opmask and both upper-ZMM states enabled by the OS. */
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe6) == 0xe6;
}

int infs__cpu_avx512_vnni(void)
{
	static atomic_int known = -1;
	return asked_once(&known, probe_avx512_vnni);
}
#else
int infs__cpu_avx2(void)
{
	return 0;
}

int infs__cpu_avx512_vnni(void)
{
	return 0;
}
#endif
