/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The Prometheus text exposition format (version 0.0.4), the pieces both
 * metrics files need (the VMM's --metrics-file, the libvirt bridge's):
 * a family's HELP and TYPE lines and an escaped label value.
 */
#ifndef SYSIDLE_COMMON_PROMTEXT_H
#define SYSIDLE_COMMON_PROMTEXT_H

#include <stdio.h>

/* "# HELP NAME HELP" and "# TYPE NAME TYPE". The caller guarantees that
 * @help has no backslash or newline (the help texts are constants). */
void prom_family(FILE *f, const char *name, const char *type,
		 const char *help);
/* @s as a label value: backslash, double quote and newline escaped (NULL:
 * empty). */
void prom_label(FILE *f, const char *s);

#endif
