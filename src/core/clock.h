/* A monotonic wall clock for the seconds that reports and progress callbacks carry. */
#ifndef MF_CORE_CLOCK_H
#define MF_CORE_CLOCK_H
#ifdef __cplusplus
extern "C" {
#endif

/* Seconds since an arbitrary fixed point; only differences mean anything. */
double mf_seconds(void);

#ifdef __cplusplus
}
#endif
#endif
