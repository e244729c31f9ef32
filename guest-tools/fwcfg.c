// SPDX-License-Identifier: GPL-2.0-only
/* fw_cfg, legacy I/O interface: 16-bit selector write, 8-bit data reads. */
#include "rt.h"

static inline void outw_sel(u16 key)
{
	outw(GUEST_PORT_FW_CFG_SEL, key);
}

void fwcfg_read_more(void *buf, size_t n)
{
	u8 *p = buf;

	for (size_t i = 0; i < n; i++)
		p[i] = inb(GUEST_PORT_FW_CFG_DATA);
}

void fwcfg_read(u16 key, void *buf, size_t n)
{
	outw_sel(key);
	fwcfg_read_more(buf, n);
}

u32 fwcfg_nb_cpus(void)
{
	u8 sig[4];
	u16 n = 0;

	fwcfg_read(FW_CFG_SIGNATURE, sig, 4);
	if (memcmp(sig, "QEMU", 4))
		return 1;
	fwcfg_read(FW_CFG_NB_CPUS, &n, 2);
	return n < 1 ? 1 : n;
}
