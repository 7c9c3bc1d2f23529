-- PostgreSQL twin of migrations/0005_report.sql.
-- Reports written by the report step (step 5), one per simulation: where report.md lies and
-- its chat summary, for /report and the daily digest's links to new reports.
CREATE TABLE sim_reports (
    sim_id      TEXT PRIMARY KEY REFERENCES simulations(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,               -- report.md; the charts are in charts/ beside it
    title       TEXT NOT NULL,
    summary     TEXT NOT NULL,
    sections    BIGINT NOT NULL,
    tool_calls  BIGINT NOT NULL,
    citations   BIGINT NOT NULL,
    unverified  BIGINT NOT NULL,             -- citations no tool returned
    created_at  TEXT NOT NULL
);
