"""The environment a run child gets: what it needs to run, and no other secret.

The child runs camel-oasis against the LLM endpoint, so it needs the LLM key (the variable
named by ``[llm] api_key_env``), the interpreter's and the system's basics (``PATH``, ``HOME``,
locale, time zone, ``PYTHON*``, temporary folder, CA bundles and proxies to reach the
endpoint) and the settings of the libraries it loads (``CAMEL_*``, ``OASIS_*``, thread counts
of the numeric libraries, Hugging Face offline switches). Chat tokens (``DISCORD_TOKEN``,
``TELEGRAM_BOT_TOKEN``) and every other secret-looking variable stay with the bot: a library
that logs or uploads its environment cannot leak what it never had.
"""
from __future__ import annotations

from typing import Mapping

from engine.redact import looks_secret

KEEP_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "TEMP", "TMP",
    "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "XDG_CACHE_HOME", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
})
KEEP_PREFIXES = ("LC_", "PYTHON", "CAMEL_", "OASIS_", "OMP_", "MKL_", "OPENBLAS_", "HF_", "TRANSFORMERS_")


def child_environment(environ: Mapping[str, str], api_key_env: str = "",
                      extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` a run child may see, the LLM key under ``api_key_env``, and
    ``extra`` (given by the caller, kept as it is)."""
    env = {}
    for name, value in environ.items():
        kept = name.upper() in KEEP_NAMES or name.upper().startswith(KEEP_PREFIXES)
        if kept and not looks_secret(name):
            env[name] = value
    if api_key_env and api_key_env in environ:
        env[api_key_env] = environ[api_key_env]
    env.update(extra or {})
    return env
