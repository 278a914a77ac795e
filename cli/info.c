/* cli/info.c: `bib info [--json]`, a thin wrapper over bib_info_report. */
#include <stdio.h>

#include "include/bib.h"
#include "cli/cli.h"

int bib_cli_info(const bib_options_t *options, int json) {
    char *report = NULL;
    bib_status_t st = bib_info_report(options, json, &report);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: info: %s\n", bib_status_name(st));
        return bib_cli_exit_code(st);
    }
    fputs(report, stdout);
    bib_free(report);
    return 0;
}
