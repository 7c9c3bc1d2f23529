-- The language a job was started in (engine.i18n): its progress lines, errors and results are
-- written in it, also after a restart or when another bot process takes it over.
ALTER TABLE jobs ADD COLUMN language TEXT NOT NULL DEFAULT 'en';
