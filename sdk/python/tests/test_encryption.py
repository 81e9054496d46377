"""Client-side encryption (sundial.Keyring): the envelope alone, then the
client and the worker against a real API (SUNDIAL_URL)."""

import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import unittest
from typing import Any, Dict
from unittest import mock

import sundial
from sundial import EncryptionError, JobContext, Keyring, MissingKey, Worker
from sundial.encryption import FIELD, key_id

from support import API_KEY, URL, client, need_api, queue_name, running

try:
    import cryptography  # noqa: F401
    HAVE_CRYPTO = True
except ImportError:
    HAVE_CRYPTO = False

NEED_CRYPTO = "needs the cryptography package (apt-get install python3-cryptography)"


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def marker() -> str:
    return "MARKER-" + secrets.token_hex(6)


class ImportMessageTest(unittest.TestCase):
    def test_missing_cryptography_names_the_fix(self) -> None:
        kr = Keyring.parse("k1:" + new_key())  # parsing needs no cryptography
        with mock.patch.dict(sys.modules, {"cryptography": None, "cryptography.hazmat.primitives.ciphers.aead": None}):
            with self.assertRaises(ImportError) as cm:
                kr.seal("payload", {"a": 1})
        self.assertIn("sundial-sdk[crypto]", str(cm.exception))
        self.assertIn("python3-cryptography", str(cm.exception))
        # The SDK itself imports and submits in the clear without it.
        subprocess.run([sys.executable, "-c", "import sys; sys.modules['cryptography'] = None; "
                        "import sundial; sundial.Keyring.parse('k1:' + 'A' * 43 + '=')"], check=True)


@unittest.skipUnless(HAVE_CRYPTO, NEED_CRYPTO)
class EnvelopeTest(unittest.TestCase):
    def test_round_trip_hides_the_plaintext(self) -> None:
        m = marker()
        kr = Keyring.parse("k1:" + new_key())
        v = kr.seal("payload", {"ssn": m})
        text = json.dumps(v)
        self.assertTrue(sundial.is_encrypted(v))
        self.assertEqual(set(v[FIELD]), {"v", "kid", "dek", "iv", "ct"})
        self.assertEqual((v[FIELD]["v"], key_id(v)), (1, "k1"))
        self.assertNotIn(m, text)
        self.assertNotIn("ssn", text)
        self.assertEqual(kr.open("payload", v), {"ssn": m})
        self.assertNotEqual(kr.seal("payload", {"ssn": m}), v)
        with self.assertRaises(EncryptionError):
            kr.open("result", v)  # bound to what it is

    def test_text(self) -> None:
        m = marker()
        kr = Keyring.parse("k1:" + new_key())
        s = kr.seal_text("error", "card " + m)
        self.assertTrue(s.startswith("$sundial_enc:"))
        self.assertNotIn(m, s)
        self.assertEqual(kr.open_text("error", "timeout after 3s: " + s), "timeout after 3s: card " + m)
        self.assertEqual(kr.open_text("error", "plain"), "plain")

    def test_rotation_and_missing_key(self) -> None:
        k1, k2 = new_key(), new_key()
        old = Keyring.parse(f"k1:{k1}")
        rotated = Keyring.parse(f"k1:{k1},k2:{k2}")
        self.assertEqual(rotated.primary, "k2")
        v = old.seal("payload", [1, 2])
        self.assertEqual(rotated.open("payload", v), [1, 2])
        nv = rotated.seal("payload", 3)
        self.assertEqual(key_id(nv), "k2")
        with self.assertRaises(MissingKey) as cm:
            old.open("payload", nv)
        self.assertEqual(str(cm.exception), 'payload encrypted with key "k2", which this keyring lacks')
        self.assertEqual(Keyring.parse(f"k1:{k1}\nk2:{k2}\n", primary="k1").primary, "k1")
        # Another key under the same id.
        with self.assertRaises(EncryptionError) as cm2:
            Keyring.parse("k1:" + new_key()).open("payload", v)
        self.assertNotIsInstance(cm2.exception, MissingKey)
        self.assertEqual(cm2.exception.key_id, "k1")

    def test_tamper(self) -> None:
        kr = Keyring.parse(f"k1:{new_key()},k2:{new_key()}", primary="k1")
        v = kr.seal("payload", {"a": marker()})

        def changed(field: str, value: Any) -> Dict[str, Any]:
            return {FIELD: dict(v[FIELD], **{field: value})}

        def flipped(field: str) -> Dict[str, Any]:
            b = bytearray(base64.b64decode(v[FIELD][field]))
            b[-1] ^= 1
            return changed(field, base64.b64encode(bytes(b)).decode())

        for name, bad in {"ct": flipped("ct"), "iv": flipped("iv"), "dek": flipped("dek"),
                          "kid relabelled": changed("kid", "k2"), "version": changed("v", 2),
                          "extra field": {FIELD: dict(v[FIELD], x=1)}, "not base64": changed("ct", "!!")}.items():
            with self.subTest(name), self.assertRaises(EncryptionError):
                kr.open("payload", bad)

    def test_parse_and_env(self) -> None:
        k = new_key()
        for text, primary, err in [("", None, "no key"), ("k1", None, "entry 1"), ("k 1:" + k, None, "entry 1"),
                                   ("k1:short", None, "32 bytes"), (f"k1:{k},k1:{k}", None, "twice"),
                                   ("k1:" + k, "k9", "primary")]:
            with self.subTest(text=text[:8]), self.assertRaises(ValueError) as cm:
                Keyring.parse(text, primary)
            self.assertIn(err, str(cm.exception))
            self.assertNotIn(k, str(cm.exception))
        self.assertNotIn(k, repr(Keyring.parse("k1:" + k)))
        self.assertIsNone(Keyring.from_env({}))
        with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
            f.write(f"# keys\nk1:{k}\nk2:{new_key()}\n")
            f.flush()
            kr = Keyring.from_env({"SUNDIAL_KEYRING_FILE": f.name, "SUNDIAL_KEYRING_PRIMARY": "k1"})
            self.assertEqual((kr.ids, kr.primary), (["k1", "k2"], "k1"))
            with self.assertRaises(ValueError):
                Keyring.from_env({"SUNDIAL_KEYRING_FILE": f.name, "SUNDIAL_KEYRING": "k1:" + k})
        with self.assertRaises(ValueError):
            Keyring.from_env({"SUNDIAL_KEYRING_PRIMARY": "k1"})


@unittest.skipUnless(HAVE_CRYPTO, NEED_CRYPTO)
class EncryptedJobsTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        k1, k2 = new_key(), new_key()
        self.old = Keyring.parse(f"k1:{k1}")
        self.ring = Keyring.parse(f"k1:{k1},k2:{k2}")
        self.plain = client()
        self.c = client(keyring=self.ring)

    def worker(self, q: str, **options: Any) -> Worker:
        return Worker([q], url=URL, api_key=API_KEY, wait_seconds=5, shutdown_timeout=5, **options)

    def test_round_trip_result_and_error_encrypted(self) -> None:
        q, m = queue_name("enc"), marker()
        seen = []

        def check(ctx: JobContext) -> Any:
            seen.append((ctx.payload, ctx.job["payload"]))
            if ctx.payload.get("fail"):
                raise sundial.NoRetry("rejected " + ctx.payload["ssn"])
            return {"echo": ctx.payload["ssn"]}

        # Submitted under k1 (a client not yet rotated); the worker has k2 as primary.
        ok = client(keyring=self.old).submit("check", {"ssn": m}, queue=q)
        bad = self.c.submit("check", {"ssn": m, "fail": True}, queue=q, max_attempts=3)
        self.assertEqual(key_id(ok["payload"]), "k1")
        self.assertEqual(key_id(bad["payload"]), "k2")
        w = self.worker(q, keyring=self.ring)
        w.handle("check", check)
        with running(w):
            done = self.plain.wait(ok["id"], timeout=30)
            dead = self.plain.wait(bad["id"], timeout=30)
        self.assertIn(({"ssn": m}, {"ssn": m}), seen)
        self.assertEqual((done["state"], key_id(done["result"])), ("succeeded", "k2"))
        self.assertEqual((dead["state"], dead["attempt"]), ("dead", 1))
        for j in (done, dead):
            self.assertNotIn(m, json.dumps(j))
        self.assertEqual(self.c.decrypt(done)["result"], {"echo": m})
        self.assertEqual(self.c.decrypt(done)["payload"], {"ssn": m})
        self.assertEqual(self.c.decrypt(dead)["last_error"], "rejected " + m)
        with self.assertRaises(MissingKey):
            client(keyring=self.old).decrypt(done)  # the result is under k2

    def test_worker_lacking_the_key_fails_the_job_for_good(self) -> None:
        q = queue_name("enc-nokey")
        calls = []
        k3 = client(keyring=Keyring.parse("k3:" + new_key()))
        j1 = k3.submit("check", {"ssn": marker()}, queue=q, max_attempts=5)
        w = self.worker(q, keyring=self.ring)
        w.handle("check", lambda ctx: calls.append(ctx))
        with running(w):
            j1 = self.plain.wait(j1["id"], timeout=30)
        self.assertEqual((j1["state"], j1["attempt"], calls), ("dead", 1, []))
        self.assertEqual(j1["last_error"], 'payload encrypted with key "k3", which this worker\'s keyring lacks')
        # A worker with no keyring at all.
        q2 = queue_name("enc-none")
        j2 = self.c.submit("check", {"ssn": marker()}, queue=q2, max_attempts=5)
        w2 = self.worker(q2)
        w2.handle("check", lambda ctx: calls.append(ctx))
        with running(w2):
            j2 = self.plain.wait(j2["id"], timeout=30)
        self.assertEqual((j2["state"], j2["attempt"], calls), ("dead", 1, []))
        self.assertEqual(j2["last_error"], 'payload encrypted with key "k2", which this worker\'s keyring lacks')

    def test_long_error_text_is_cut_to_fit_sealed(self) -> None:
        q, m = queue_name("enc-long"), marker()
        j = self.c.submit("check", {"ssn": m}, queue=q, max_attempts=1)

        def long_failure(ctx: JobContext) -> None:
            raise sundial.NoRetry(m + "x" * 60_000)

        w = self.worker(q, keyring=self.ring)
        w.handle("check", long_failure)
        with running(w):
            j = self.plain.wait(j["id"], timeout=30)
        self.assertEqual(j["state"], "dead")
        self.assertLessEqual(len(j["last_error"]), 64 << 10)
        text = self.c.decrypt(j)["last_error"]
        self.assertTrue(text.startswith(m + "xxx") and text.endswith("..."), text[:40])

    def test_tampered_payload_fails_for_good(self) -> None:
        q = queue_name("enc-tamper")
        v = self.ring.seal("payload", {"ssn": marker()})
        ct = bytearray(base64.b64decode(v[FIELD]["ct"]))
        ct[0] ^= 0x80
        v[FIELD]["ct"] = base64.b64encode(bytes(ct)).decode()
        j = self.plain.submit("check", v, queue=q, max_attempts=5)
        w = self.worker(q, keyring=self.ring)
        w.handle("check", lambda ctx: None)
        with running(w):
            j = self.plain.wait(j["id"], timeout=30)
        self.assertEqual((j["state"], j["attempt"]), ("dead", 1))
        self.assertIn('payload encrypted with key "k2" does not decrypt', j["last_error"])

    def test_submit_many_workflow_and_batch_encrypt(self) -> None:
        q, m = queue_name("enc-many"), marker()
        many = self.c.submit_many([{"queue": q, "type": "t", "payload": {"m": m}}])
        wf = self.c.submit_workflow([{"name": "a", "job": {"queue": q, "type": "t", "payload": {"m": m}}}])
        b = self.c.create_batch([{"queue": q, "type": "t", "payload": {"m": m}}])
        jobs = [many[0], wf["steps"]["a"], self.plain.get(b["job_ids"][0])]
        for j in jobs:
            self.assertEqual(key_id(j["payload"]), "k2")
            self.assertNotIn(m, json.dumps(j))
            self.assertEqual(self.c.decrypt(j)["payload"], {"m": m})


if __name__ == "__main__":
    unittest.main()
