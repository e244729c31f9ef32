/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * fw_cfg, legacy I/O interface: a 16-bit selector write to 0x510, then
 * byte reads from 0x511. Signature, ID, RAM size, CPU count, and a file
 * directory (key 0x19) naming the files at keys 0x20 and up.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define FW_CFG_FILE_FIRST 0x20
#define FW_CFG_MAX_FILES 4
#define FW_CFG_VERSION "sysidle-vmm 0.1.0"

struct fw_cfg_item {
	uint8_t *data;
	uint32_t len;
};

static struct {
	pthread_mutex_t lock;
	uint16_t key;
	uint32_t offset;
	uint8_t signature[4], id[4], ram_size[8], nb_cpus[2];
	uint8_t dir[4 + 64 * FW_CFG_MAX_FILES];
	char cmdline[4096];
	char version[sizeof(FW_CFG_VERSION)];
	struct fw_cfg_item files[FW_CFG_MAX_FILES];
	unsigned int nfiles;
} fw = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_be(uint8_t *p, uint64_t v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		p[n - 1 - i] = (uint8_t)(v >> (8 * i));
}

static struct fw_cfg_item fw_cfg_item(uint16_t key)
{
	switch (key) {
	case FW_CFG_SIGNATURE:
		return (struct fw_cfg_item){ fw.signature, 4 };
	case FW_CFG_ID:
		return (struct fw_cfg_item){ fw.id, 4 };
	case FW_CFG_RAM_SIZE:
		return (struct fw_cfg_item){ fw.ram_size, 8 };
	case FW_CFG_NB_CPUS:
		return (struct fw_cfg_item){ fw.nb_cpus, 2 };
	case FW_CFG_FILE_DIR:
		return (struct fw_cfg_item){ fw.dir, 4 + 64 * fw.nfiles };
	default:
		if (key >= FW_CFG_FILE_FIRST &&
		    key < FW_CFG_FILE_FIRST + fw.nfiles)
			return fw.files[key - FW_CFG_FILE_FIRST];
		return (struct fw_cfg_item){ NULL, 0 };
	}
}

static void fw_cfg_io(struct vcpu *v, uint64_t off, uint8_t *data,
		      unsigned int len, bool is_write, void *opaque)
{
	struct fw_cfg_item it;

	(void)v; (void)opaque;
	pthread_mutex_lock(&fw.lock);
	if (off == 0) { /* selector */
		if (is_write) {
			fw.key = data[0] | (len > 1 ? (uint16_t)(data[1] << 8) : 0);
			fw.offset = 0;
		} else {
			memset(data, 0, len);
		}
	} else if (!is_write) { /* data: one byte per access */
		it = fw_cfg_item(fw.key);
		memset(data, 0, len);
		data[0] = fw.offset < it.len ? it.data[fw.offset] : 0;
		fw.offset++;
	}
	pthread_mutex_unlock(&fw.lock);
}

static void fw_cfg_add_file(const char *name, void *data, uint32_t len)
{
	uint8_t *e = fw.dir + 4 + 64 * fw.nfiles;

	put_be(e, len, 4);
	put_be(e + 4, FW_CFG_FILE_FIRST + fw.nfiles, 2);
	snprintf((char *)e + 8, 56, "%s", name);
	fw.files[fw.nfiles++] = (struct fw_cfg_item){ data, len };
	put_be(fw.dir, fw.nfiles, 4);
}

int fw_cfg_init(struct vm *vm)
{
	memcpy(fw.signature, "QEMU", 4);
	put_le(fw.id, 1, 4); /* traditional interface, no DMA */
	put_le(fw.ram_size, vm->ram_size, 8);
	put_le(fw.nb_cpus, vm->ncpus, 2);
	memcpy(fw.version, FW_CFG_VERSION, sizeof(FW_CFG_VERSION));
	fw_cfg_add_file("etc/sysidle/version", fw.version,
			(uint32_t)strlen(fw.version));
	snprintf(fw.cmdline, sizeof(fw.cmdline), "%s", vm->cfg->append);
	fw_cfg_add_file("etc/sysidle/cmdline", fw.cmdline,
			(uint32_t)strlen(fw.cmdline));
	return bus_register(BUS_PIO, GUEST_PORT_FW_CFG_SEL, 2, fw_cfg_io, NULL);
}
