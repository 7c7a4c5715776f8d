#!/usr/bin/python3
"""Renders SONiC's own buffer and QoS templates for a SKU into the CONFIG_DB a
fresh switch of that SKU starts from, as `sonic-cfggen -t` does on the switch.

Usage:
  render_sonic_templates.py TEMPLATES OUT PLATFORM/HWSKU=ASIC_TYPE[:dynamic]...

TEMPLATES holds common/ (sonic-buildimage's files/build_templates) and one
folder per PLATFORM/HWSKU (the SKU's device files); see its SOURCE.md. For
each SKU, OUT/<HWSKU>.json gets DEVICE_METADATA, PORT (from the SKU's
port_config.ini), and the tables buffers.json.j2 and qos.json.j2 render.
With ":dynamic", the SKU in SONiC's dynamic buffer model: buffer_model
"dynamic" and the SKU's buffers_dynamic.json.j2 (what sonic-cfggen renders
for that model), into OUT/<HWSKU>-dynamic.json.

Only what these templates use is provided: the `sort_by_port_index` filter
and the `template_exists` global (both as sonic-cfggen defines them), the
loader search path (the SKU's folder, then the common templates), trim_blocks,
and `asic_type` (sonic_version.yml's, passed to sonic-cfggen with -y).

Exit status: 0 rendered; 77 when this Python has no jinja2 (the tests that
need the output are then skipped: OUT/SKIPPED says why); 1 on any error.
"""

import json
import os
import re
import shutil
import sys

SKIP = 77


def read_port_config(path):
    """PORT table from a port_config.ini: columns named by its last '# name ...' header."""
    columns = None
    ports = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line:
                continue
            if line.startswith("#"):
                words = line.lstrip("#").split()
                if words and words[0] == "name":
                    columns = words
                continue
            if columns is None:
                raise ValueError(f"{path}: a port line before the '# name ...' header")
            values = line.split()
            if len(values) > len(columns):
                raise ValueError(f"{path}: more values than columns: {line}")
            entry = dict(zip(columns, values))
            name = entry.pop("name")
            ports[name] = entry
    return ports


def port_index(name):
    """The number in EthernetN (backplane ports sort after the front panel)."""
    m = re.match(r"Ethernet(-BP)?(\d+)$", name)
    if not m:
        raise ValueError(f"cannot order port {name}")
    return int(m.group(2)) + (1024 if m.group(1) else 0)


def render_sku(jinja2, templates, platform, hwsku, asic_type, buffer_model="traditional"):
    sku_dir = os.path.join(templates, platform, hwsku)
    loader = jinja2.FileSystemLoader([sku_dir, os.path.join(templates, "common")])
    env = jinja2.Environment(loader=loader, trim_blocks=True)

    def sort_by_port_index(value):
        # Sorts the list in place and returns nothing, as the templates expect
        # ("{%- if PORT_ALL | sort_by_port_index %}{% endif %}").
        if isinstance(value, list) and value:
            value.sort(key=port_index)

    def template_exists(name):
        try:
            loader.get_source(env, name)
            return True
        except jinja2.exceptions.TemplateNotFound:
            return False

    env.filters["sort_by_port_index"] = sort_by_port_index
    env.globals["template_exists"] = template_exists

    db = {
        "DEVICE_METADATA": {
            "localhost": {
                "hwsku": hwsku,
                "platform": platform,
                "buffer_model": buffer_model,
                "hostname": "sonic",
                "mac": "00:11:22:33:44:55",
            }
        },
        "PORT": read_port_config(os.path.join(sku_dir, "port_config.ini")),
    }
    for port in db["PORT"].values():
        # What a fresh CONFIG_DB has beside port_config.ini's columns.
        port.setdefault("mtu", "9100")
        port.setdefault("admin_status", "up")
    context = dict(db)
    context["asic_type"] = asic_type
    buffers = "buffers_dynamic.json.j2" if buffer_model == "dynamic" else "buffers.json.j2"
    for name in (buffers, "qos.json.j2"):
        text = env.get_template(name).render(context)
        try:
            tables = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{platform}/{hwsku}/{name} did not render JSON: {e}") from e
        for table, entries in tables.items():
            db.setdefault(table, {}).update(entries)
    return db


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    templates, out = argv[1], argv[2]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    try:
        import jinja2
    except ImportError:
        why = f"{sys.executable} has no jinja2 (Debian: python3-jinja2)"
        with open(os.path.join(out, "SKIPPED"), "w", encoding="utf-8") as f:
            f.write(why + "\n")
        print("skipped: " + why)
        return SKIP
    for spec in argv[3:]:
        sku, _, asic_spec = spec.partition("=")
        asic_type, _, model = asic_spec.partition(":")
        platform, _, hwsku = sku.partition("/")
        if not (platform and hwsku and asic_type) or model not in ("", "dynamic"):
            print(f"bad SKU '{spec}': want PLATFORM/HWSKU=ASIC_TYPE[:dynamic]", file=sys.stderr)
            return 1
        try:
            db = render_sku(jinja2, templates, platform, hwsku, asic_type, model or "traditional")
        except (OSError, ValueError, jinja2.TemplateError) as e:
            print(f"{sku}: {e}", file=sys.stderr)
            return 1
        path = os.path.join(out, hwsku + ("-dynamic" if model else "") + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(db, f, indent=2, sort_keys=True)
        print(f"{path}: " + ", ".join(f"{t} {len(v)}" for t, v in sorted(db.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
