/* Settings read as a double and kept as a float: the flag parser and the
 * model spec parser hold a nonzero value to what the float can keep. */
#ifndef PT_UTIL_FLOAT_NARROW_H
#define PT_UTIL_FLOAT_NARROW_H

#include <stddef.h>

/* NULL where x narrows to a float that keeps it (written to *out); else
 * what it would become: "0", "a denormal" (which the kernels flush to 0)
 * or "infinite". */
const char *pt_float_narrow(double x, float *out);
/* The values a float setting of [lo, hi] takes, as messages say them:
 * "0 or a number in [1.17549435e-38, hi]" where lo is 0, else "a number
 * in [lo, hi], 0 or at least 1.17549435e-38 in size". */
void pt_float_range_text(char *buf, size_t size, double lo, double hi);

#endif
