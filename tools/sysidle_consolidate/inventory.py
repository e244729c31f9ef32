# SPDX-License-Identifier: GPL-2.0-only
"""The migration plan's inventory (plan.py): the hosts and their domains,
read from the inventory structure (the JSON of --plan-input, the same one
that the libvirt inventory in plan_libvirt.py builds) and checked: the
format is in plan.py's doc. parse_inventory() raises InventoryError."""
from .states import FULL_NOTED as IDLE_STATE


class InventoryError(ValueError):
    pass


class Domain:
    def __init__(self, name, uuid, vcpus, memory_kib, run_state, state,
                 since_ms, hold=None):
        self.name = name
        self.hold = hold        # why it must not move now (a str), or None
        self.uuid = uuid
        self.vcpus = vcpus
        self.memory_kib = memory_kib
        self.run_state = run_state
        self.state = state
        self.since_ms = since_ms

    def fully_idle(self):
        return self.run_state == "running" and self.state == IDLE_STATE


class Host:
    def __init__(self, uri, cpus, memory_kib, domains, inactive):
        self.uri = uri
        self.cpus = cpus
        self.memory_kib = memory_kib
        self.domains = sorted(domains, key=lambda d: d.name)
        self.inactive = sorted(inactive)       # [(name, uuid or None)]


def _field(obj, key, kind, where, required=True, default=None):
    if key not in obj or obj[key] is None:
        if required:
            raise InventoryError("%s: %r missing" % (where, key))
        return default
    v = obj[key]
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InventoryError("%s: %r must be an integer >= 0, not %r" %
                                 (where, key, v))
    elif kind is str:
        if not isinstance(v, str) or not v:
            raise InventoryError("%s: %r must be a non-empty string, not %r"
                                 % (where, key, v))
    elif not isinstance(v, kind):
        raise InventoryError("%s: %r has the wrong type" % (where, key))
    return v


def parse_inventory(inv):
    """(taken_unix_ms or None, [Host] in URI order) from the inventory
    structure; raises InventoryError."""
    if not isinstance(inv, dict):
        raise InventoryError("inventory: not a JSON object")
    taken = _field(inv, "taken_unix_ms", int, "inventory", required=False)
    raw_hosts = _field(inv, "hosts", list, "inventory")
    hosts = []
    seen = set()
    for i, rh in enumerate(raw_hosts):
        if not isinstance(rh, dict):
            raise InventoryError("inventory: host %d: not an object" % i)
        uri = _field(rh, "uri", str, "host %d" % i)
        if uri in seen:
            raise InventoryError("host %s: given twice" % uri)
        seen.add(uri)
        where = "host %s" % uri
        cpus = _field(rh, "cpus", int, where)
        mem = _field(rh, "memory_kib", int, where)
        doms = []
        names = set()
        for j, rd in enumerate(_field(rh, "domains", list, where,
                                      required=False, default=[])):
            if not isinstance(rd, dict):
                raise InventoryError("%s: domain %d: not an object" %
                                     (where, j))
            name = _field(rd, "name", str, "%s: domain %d" % (where, j))
            dw = "%s: domain %s" % (where, name)
            if name in names:
                raise InventoryError("%s: listed twice" % dw)
            names.add(name)
            doms.append(Domain(
                name,
                _field(rd, "uuid", str, dw, required=False),
                _field(rd, "vcpus", int, dw),
                _field(rd, "memory_kib", int, dw),
                _field(rd, "run_state", str, dw, required=False,
                       default="running"),
                _field(rd, "state", str, dw, required=False),
                _field(rd, "since_unix_ms", int, dw, required=False),
                _field(rd, "hold", str, dw, required=False)))
        inactive = []
        for j, ri in enumerate(_field(rh, "inactive_domains", list, where,
                                      required=False, default=[])):
            if not isinstance(ri, dict):
                raise InventoryError("%s: inactive domain %d: not an object"
                                     % (where, j))
            iw = "%s: inactive domain %d" % (where, j)
            inactive.append((_field(ri, "name", str, iw),
                             _field(ri, "uuid", str, iw, required=False)))
        hosts.append(Host(uri, cpus, mem, doms, inactive))
    hosts.sort(key=lambda h: h.uri)
    return taken, hosts
