"""The session and audit log routes against a real API (SUNDIAL_URL), which
the SDK test stack runs with an admin key and without a history store."""

import hashlib
import json
import unittest

import sundial

from support import API_KEY, client, need_api


class AuditTest(unittest.TestCase):
    def setUp(self) -> None:
        need_api(self)
        self.c = client()

    def test_session_names_the_key_by_its_id(self) -> None:
        s = self.c.session()
        self.assertEqual(s["actor"]["kind"], "key")
        self.assertEqual(s["actor"]["id"], "key:" + hashlib.sha256(API_KEY.encode()).hexdigest()[:12])
        self.assertIn("admin", s["scopes"])
        self.assertEqual(s["queues"], "*")
        self.assertNotIn(API_KEY, json.dumps(s))

    def test_audit_without_history_store_is_unavailable(self) -> None:
        with self.assertRaises(sundial.Unavailable) as cm:
            self.c.audit(action="queue.pause")
        self.assertIn("log", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
