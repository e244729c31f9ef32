/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VMM's output files (--stats-json, --sysidle-log, --metrics-file):
 * checked at start and opened without ever blocking, so that a FIFO with
 * no reader, or one whose reader stalls, cannot hold the VM's start, its
 * run or its stop. A path may name a regular file (created or truncated),
 * a FIFO or a character device (/dev/null, a terminal); a directory, a
 * socket or a block device is refused.
 */
#ifndef VMM_BASE_FILE_H
#define VMM_BASE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* "a FIFO", "a directory", ...: the kind of file @mode (st_mode) says. */
const char *file_kind_name(mode_t mode);

/*
 * Whether @path could be written later: when it exists, it is a kind of
 * file output_open() takes and this process may write it; when it does
 * not, its directory exists and this process may create files in it.
 * Opens nothing, so it never blocks (a FIFO is not opened). Returns 0, or
 * -1 with @why (@n bytes) saying what is wrong.
 */
int output_check(const char *path, char *why, size_t n);

/*
 * Whether files can be created next to @path: its directory exists, is a
 * directory and this process may create files in it (a file written
 * elsewhere and renamed over @path). Returns 0, or -1 with @why.
 */
int output_dir_check(const char *path, char *why, size_t n);

/*
 * Open @path for writing, O_NONBLOCK and O_CLOEXEC, never blocking; the fd
 * stays non-blocking (write it with output_write()). A FIFO with no reader
 * fails with ENXIO, and only that; a directory with EISDIR, a socket or a
 * block device with ENODEV. *@fifo (may be NULL)
 * tells a FIFO. Returns the fd, or -1 with errno set and @why (@n bytes)
 * saying what is wrong in words an operator understands.
 */
int output_open(const char *path, bool *fifo, char *why, size_t n);

/*
 * Write @len bytes of @buf to @fd, each write() once poll() calls @fd
 * writable, waiting in poll() until @deadline_ns (CLOCK_MONOTONIC, as
 * now_ns(); 0: no waiting at all). The caller guarantees that such a
 * write() cannot block: @fd is non-blocking (output_open()), or it is a
 * pipe or terminal that no other thread writes and @len is at most
 * PIPE_BUF (stderr). Returns the bytes written: fewer than @len when the
 * time ran out (errno ETIMEDOUT) or a write failed (errno set). A pipe's
 * reader sees writes of up to PIPE_BUF bytes whole or not at all.
 */
size_t output_write(int fd, const void *buf, size_t len,
		    uint64_t deadline_ns);

#endif
