"""Encrypts in Python: submits jobs whose payload holds a marker with a
client whose keyring comes from SUNDIAL_KEYRING (TestEncryptionAcrossLanguages).
Prints the jobs' ids as JSON."""

import json
import sys

from sundial import Client, Keyring

marker, check_queue, echo_queue = sys.argv[1:4]
c = Client(keyring=Keyring.from_env())
ok = c.submit("xlang.check", {"ssn": marker, "lang": "python"}, queue=check_queue)
fail = c.submit("xlang.check", {"ssn": marker, "fail": True}, queue=check_queue, max_attempts=2,
                backoff={"base_seconds": 0, "max_seconds": 0})
echo = c.submit("sundial.echo", {"ssn": marker}, queue=echo_queue)
print(json.dumps({"ok": ok["id"], "fail": fail["id"], "echo": echo["id"],
                  "payload": ok["payload"]}))
