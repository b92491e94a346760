/* Warnings raised where no output is at hand, such as a backend falling
 * back to a slower path in the middle of a step. The library prints
 * nothing unless its caller gave it somewhere to print (pt_config.log), so
 * they are held here until the trainer, which knows, prints them. */
#ifndef PT_UTIL_NOTICE_H
#define PT_UTIL_NOTICE_H
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Holds one line (printf format, no newline), once: a line already held
 * is not held twice. Up to PT_NOTICE_MAX lines; past that, only a count.
 * Safe from any thread. */
#define PT_NOTICE_MAX 16
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void pt_notice(const char *fmt, ...);

/* Whether a line is waiting: cheap enough for every step. */
int pt_notice_pending(void);

/* Prints the lines waiting, each as "warning: LINE", in the order they
 * came, and forgets them; returns how many. out NULL keeps them. */
int pt_notice_flush(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
