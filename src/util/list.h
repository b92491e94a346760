/* Comma-separated lists on command lines and in spec files. */
#ifndef PT_UTIL_LIST_H
#define PT_UTIL_LIST_H
#include <string.h>

/* Whether list has an empty entry: it is empty, starts or ends with a
 * comma, or has two in a row. strtok-style splitting passes over such an
 * entry, dropping a slip without a word. */
static inline int pt_list_has_empty(const char *list) {
  const size_t n = strlen(list);
  return !n || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,") != NULL;
}

/* The entries of a list: its commas and one. */
static inline int pt_list_count(const char *list) {
  int n = 1;
  for (; *list; list++) n += *list == ',';
  return n;
}

#endif
