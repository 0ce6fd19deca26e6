/* The CPU's vector features, asked once per process. */
#ifndef INFS_CPU_H
#define INFS_CPU_H

/* Whether this CPU runs AVX2 with FMA and F16C (x86-64); 0 elsewhere. */
int infs__cpu_avx2(void);

#endif
