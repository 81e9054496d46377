"""The SDK's build backend (PEP 517, PEP 660): builds the pure-Python wheel
and sdist with the standard library alone.

pip builds a wheel to install even a local directory. With setuptools'
backend and `--no-build-isolation`, that needs setuptools >= 70.1 or the
`wheel` package, which many Pythons lack (a pyenv 3.11 has setuptools 65.5
and no wheel) and which cannot be fetched without a package index. This
backend needs nothing: `pip install ./sdk/python` works with or without
build isolation, on any Python the SDK supports.

It reads the [project] table of pyproject.toml (name, version, description,
requires-python, dependencies, optional-dependencies) and packages the
`sundial` directory.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "sundial"
TAG = "py3-none-any"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(text)["project"]
    except ImportError:
        return _parse_toml_subset(text)["project"]


def _parse_toml_subset(text):
    """Enough TOML for pyproject.toml's [project] tables on Pythons before
    3.11: tables, strings, arrays of strings, inline {text = "..."}."""
    data, table = {}, None
    lines = iter(text.splitlines())
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^\[([^\]]+)\]$", line)
        if m:
            table = data
            for part in m.group(1).split("."):
                table = table.setdefault(part.strip().strip('"'), {})
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        while value.startswith("[") and value.count("[") > value.count("]"):
            value += " " + next(lines).strip()
        table[key.strip().strip('"')] = _value(value)
    return data


def _value(v):
    if v.startswith("["):
        return re.findall(r'"((?:[^"\\]|\\.)*)"', v)
    if v.startswith("{"):
        return dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', v))
    if v.startswith('"'):
        return v[1:v.rindex('"')]
    return v


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + project["version"],
    ]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    lic = project.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: " + lic["text"])
    for c in project.get("classifiers", []):
        lines.append("Classifier: " + c)
    for d in project.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: " + extra)
        for d in deps:
            lines.append('Requires-Dist: %s; extra == "%s"' % (d, extra))
    body = ""
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _package_files():
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                path = os.path.join(dirpath, name)
                out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    return out


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes) pairs, the dist-info's RECORD added last."""
    project = _project()
    dist = _dist_name(project)
    info = "%s-%s.dist-info" % (dist, project["version"])
    files = list(files) + [
        (info + "/METADATA", _metadata(project).encode("utf-8")),
        (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: sundial-sdk _build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode()),
        (info + "/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = "".join("%s,%s,%d\n" % (n, _record_hash(d), len(d)) for n, d in files) + info + "/RECORD,,\n"
    name = "%s-%s-%s.whl" % (dist, project["version"], TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files + [(info + "/RECORD", record.encode())]:
            zi = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible
            zi.external_attr = 0o644 << 16
            z.writestr(zi, d, zipfile.ZIP_DEFLATED)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(n, _read(p)) for n, p in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file that puts the source directory on sys.path (PEP 660).
    return _write_wheel(wheel_directory, [("_sundial_sdk_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    name = base + ".tar.gz"
    paths = ["pyproject.toml", "README.md", "_build/backend.py"] + [n for n, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in paths:
            full = os.path.join(ROOT, rel)
            if not os.path.exists(full):
                continue
            data = _read(full)
            ti = tarfile.TarInfo(base + "/" + rel)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1767225600
            t.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata(project).encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size, ti.mode, ti.mtime = len(pkg_info), 0o644, 1767225600
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
