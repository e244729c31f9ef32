/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The version every program prints for --version: the meson project
 * version, and the git description when built from a git checkout.
 */
#ifndef SYSIDLE_COMMON_VERSION_H
#define SYSIDLE_COMMON_VERSION_H

#include <stdio.h>

/* "0.1.0" or "0.1.0 (git f8d7bf8-dirty)"; static storage. */
const char *sysidle_version(void);

/* The --version output of @prog on @f: one line, then the licence line. */
void sysidle_version_print(FILE *f, const char *prog);

#endif
