/* plan__hd.h — SYMM_HD: how the plan headers' functions are compiled, for host and
 * device under nvcc, as plain static inline functions in C. */
#ifndef SYMM_IMPL_PLAN_HD_H
#define SYMM_IMPL_PLAN_HD_H

#ifdef __CUDACC__
#define SYMM_HD static __host__ __device__ __forceinline__
#else
#define SYMM_HD static inline
#endif

#endif
