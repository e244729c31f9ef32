/* SPDX-License-Identifier: GPL-2.0-only */
/* libvirt's lifecycle events mark the domain list stale: see events.h.
 * The flags' model: tests/model/bridge_stop.pml. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "bridge.h"
#include "events.h"

static struct {
	bool loop;               /* the event loop thread runs */
	pthread_t thread;
	atomic_bool quit;        /* events_stop(): the thread ends */
	int callback;            /* the lifecycle callback's id, -1: none */
	bool failed_said;
	uint64_t listed_ns;      /* when the list was last asked for */
	atomic_bool stale;       /* an event came; set by the loop thread */
} ev = { .callback = -1 };

/* The loop thread: libvirt's default implementation, until events_stop. */
static void *events_thread(void *arg)
{
	bool said = false;

	(void)arg;
	pthread_setname_np(pthread_self(), "sysidle-events");
	/* Pairs with the release store in events_stop(). */
	while (!atomic_load_explicit(&ev.quit, memory_order_acquire)) {
		if (virEventRunDefaultImpl() == 0)
			continue;
		/* Not expected; said once, and no busy loop: the list is
		 * asked for every EVENTS_RELIST_MS anyway. */
		if (!said)
			warn("libvirt's event loop: %s", lv_error());
		said = true;
		sleep(1);
	}
	return NULL;
}

int events_start(void)
{
	if (virEventRegisterDefaultImpl() < 0 ||
	    pthread_create(&ev.thread, NULL, events_thread, NULL) != 0) {
		warn("cannot run libvirt's event loop: the domain list is asked "
		     "for at every scan");
		return -1;
	}
	ev.loop = true;
	return 0;
}

/* The loop thread: a timeout that only ends the loop's current wait. */
static void wake_loop(int timer, void *opaque)
{
	(void)opaque;
	virEventRemoveTimeout(timer);
}

void events_stop(void)
{
	if (!ev.loop)
		return;
	/* Pairs with the acquire load in events_thread(). */
	atomic_store_explicit(&ev.quit, true, memory_order_release);
	if (virEventAddTimeout(0, wake_loop, NULL, NULL) < 0)
		warn("libvirt's event loop: cannot wake it to stop: %s",
		     lv_error());
	else
		pthread_join(ev.thread, NULL);
	ev.loop = false;
}

/* The loop thread: any lifecycle change (started, stopped, suspended,
 * resumed, ...) makes the list stale. */
static int on_lifecycle(virConnectPtr conn, virDomainPtr dom, int event,
			int detail, void *opaque)
{
	(void)conn;
	(void)dom;
	(void)event;
	(void)detail;
	(void)opaque;
	/* Pairs with the acquire exchange in events_relist_due(). */
	atomic_store_explicit(&ev.stale, true, memory_order_release);
	return 0;
}

bool events_watch(virConnectPtr conn)
{
	ev.callback = -1;
	if (ev.loop)
		ev.callback = virConnectDomainEventRegisterAny(
			conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
			VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), NULL, NULL);
	if (ev.callback < 0 && ev.loop && !ev.failed_said) {
		warn("libvirt's lifecycle events: %s; the domain list is asked "
		     "for at every scan", lv_error());
		ev.failed_said = true;
	}
	/* Pairs with the acquire exchange in events_relist_due(). */
	atomic_store_explicit(&ev.stale, true, memory_order_release);
	return ev.callback >= 0;
}

void events_unwatch(virConnectPtr conn)
{
	if (ev.callback >= 0)
		virConnectDomainEventDeregisterAny(conn, ev.callback);
	ev.callback = -1;
}

bool events_relist_due(uint64_t now_ns)
{
	/* Pairs with the release stores in on_lifecycle() and
	 * events_watch(): an event before this exchange is seen by the
	 * list asked for after it. */
	bool stale = atomic_exchange_explicit(&ev.stale, false,
					      memory_order_acquire);

	if (ev.callback < 0 || stale ||
	    now_ns - ev.listed_ns >= EVENTS_RELIST_MS * 1000000ull) {
		ev.listed_ns = now_ns;
		return true;
	}
	return false;
}
