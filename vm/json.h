/* vm/json.h: the one JSON string escaper, shared by the library's traces
 * and profiles and by the `bib` command's reports (bib info, bib bench). */
#ifndef BIB_VM_JSON_H
#define BIB_VM_JSON_H

#include <stdio.h>

/* Writes s to out as a JSON string: quoted, with '"', '\\' and control
 * characters escaped. */
void bib_json_string(FILE *out, const char *s);

#endif
