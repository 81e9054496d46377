-- The outbox of sundialpg (docs/outbox.md). Migrate runs this file; it may
-- also be run by hand or by a migration tool (it can run again safely).
--
-- SubmitTx inserts one row per job inside the caller's transaction; the
-- relay (services/poller with SUNDIAL_OUTBOX_POSTGRES_URL, or
-- sundialpg.NewRelay) reads committed rows, submits their jobs to Redis and
-- deletes the rows.
CREATE TABLE IF NOT EXISTS sundial_outbox (
    -- Orders the rows of one transaction.
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction: rows are relayed in (xid, id) order, and
    -- only once every transaction with a smaller xid has ended, so a
    -- transaction that committed before another began is relayed first.
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    queue      text NOT NULL,
    -- The Sundial job id SubmitTx returned (a ULID).
    job_id     text NOT NULL,
    -- The job as the engine stores it (json, not jsonb: the payload's bytes
    -- stay as given).
    job        json NOT NULL,
    -- When the row was written (clock time, not the transaction's start):
    -- the relay lag is the age of the oldest row.
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX IF NOT EXISTS sundial_outbox_order ON sundial_outbox (xid, id);

-- One notification per writing transaction, delivered at commit (and not
-- at all on rollback), wakes the relay; it polls as well, so a lost
-- notification only delays.
CREATE OR REPLACE FUNCTION sundial_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sundial_outbox', '');
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS sundial_outbox_notify ON sundial_outbox;
CREATE TRIGGER sundial_outbox_notify AFTER INSERT ON sundial_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION sundial_outbox_notify();
