/* SPDX-License-Identifier: GPL-2.0-only */
/* The one event queue (event.h): a ring under one mutex. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/error.h"
#include "base/event.h"

static struct {
	pthread_mutex_t lock; /* everything below */
	struct vm_event ring[EVENT_QUEUE];
	uint64_t count;       /* events posted; ring[count % EVENT_QUEUE] next */
	struct event_reader *readers[EVENT_READERS];
	uint64_t notified[EVENT_READERS]; /* count at each reader's last wake */
} q = { .lock = PTHREAD_MUTEX_INITIALIZER };

void event_post(const struct vm_event *ev)
{
	pthread_mutex_lock(&q.lock);
	q.ring[q.count % EVENT_QUEUE] = *ev;
	q.count++;
	pthread_mutex_unlock(&q.lock);
}

void event_notify(void)
{
	int fds[EVENT_READERS];
	unsigned int n = 0;
	uint64_t one = 1;

	pthread_mutex_lock(&q.lock);
	for (int i = 0; i < EVENT_READERS; i++) {
		if (!q.readers[i] || q.notified[i] == q.count)
			continue;
		q.notified[i] = q.count;
		fds[n++] = q.readers[i]->fd;
	}
	pthread_mutex_unlock(&q.lock);
	/* An eventfd never blocks below its 2^64-2 limit. */
	for (unsigned int i = 0; i < n; i++)
		if (write(fds[i], &one, sizeof(one)) < 0)
			vmm_warn("event queue: %m");
}

int event_reader_open(struct event_reader *r)
{
	int slot = -1;

	r->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->fd < 0)
		return -1;
	r->lost = 0;
	pthread_mutex_lock(&q.lock);
	for (int i = 0; i < EVENT_READERS && slot < 0; i++)
		if (!q.readers[i])
			slot = i;
	if (slot >= 0) {
		q.readers[slot] = r;
		q.notified[slot] = q.count;
		r->next = q.count;
	}
	pthread_mutex_unlock(&q.lock);
	r->slot = slot;
	if (slot < 0) {
		close(r->fd);
		r->fd = -1;
		errno = EMFILE;
		return -1;
	}
	return 0;
}

void event_reader_close(struct event_reader *r)
{
	if (r->slot < 0)
		return;
	pthread_mutex_lock(&q.lock);
	q.readers[r->slot] = NULL;
	pthread_mutex_unlock(&q.lock);
	close(r->fd);
	r->fd = -1;
	r->slot = -1;
}

unsigned int event_read(struct event_reader *r, struct vm_event *out,
			unsigned int max)
{
	unsigned int n = 0;
	uint64_t buf;

	if (read(r->fd, &buf, sizeof(buf)) < 0 && errno != EAGAIN)
		vmm_warn("event queue: %m");
	pthread_mutex_lock(&q.lock);
	if (q.count - r->next > EVENT_QUEUE) {
		r->lost += q.count - EVENT_QUEUE - r->next;
		r->next = q.count - EVENT_QUEUE;
	}
	while (n < max && r->next < q.count)
		out[n++] = q.ring[r->next++ % EVENT_QUEUE];
	pthread_mutex_unlock(&q.lock);
	return n;
}

uint64_t event_reader_lost(const struct event_reader *r)
{
	uint64_t lost;

	pthread_mutex_lock(&q.lock);
	lost = r->lost;
	pthread_mutex_unlock(&q.lock);
	return lost;
}
