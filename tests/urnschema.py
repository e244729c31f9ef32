# SPDX-License-Identifier: GPL-2.0-only
"""The urn:sysidle:1 element checked against its RelaxNG schema
(common/urn-sysidle.rng) with xmllint, for every test that sees one: the
bridge's metadata, a hook's stdin, what sysidle-consolidate reads.

validate(text) takes the element alone, libvirt's metadata or a domain XML
holding it, finds the first {urn:sysidle:1}state element and returns None
when it validates, else why not (xmllint's words). xmllint missing: the
reason says so (a test then fails, it does not pass unchecked)."""
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

NS = "urn:sysidle:1"
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "common", "urn-sysidle.rng")


def validate(text):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        return "not XML: %s" % e
    el = root if root.tag == "{%s}state" % NS else \
        root.find(".//{%s}state" % NS)
    if el is None and root.tag == "state":
        # the element alone, as libvirt's metadata API returns it: in
        # the namespace it was asked for
        el = ET.Element("{%s}state" % NS, root.attrib)
    if el is None:
        return "no {%s}state element" % NS
    xmllint = shutil.which("xmllint")
    if not xmllint:
        return "xmllint is not installed (Debian: libxml2-utils)"
    ET.register_namespace("sysidle", NS)
    doc = ET.tostring(el, encoding="unicode")
    p = subprocess.run([xmllint, "--noout", "--relaxng", SCHEMA, "-"],
                       input=doc, capture_output=True, text=True,
                       timeout=30)
    return None if p.returncode == 0 else "%s: %s" % (doc, p.stderr.strip())
