"""What a run child's environment keeps and drops (the real child is checked in test_run_secrets)."""
from __future__ import annotations

from engine.sim.run.child_env import child_environment


def test_only_the_basics_library_settings_and_the_llm_key_pass():
    parent = {"PATH": "/usr/bin", "HOME": "/home/bot", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
              "PYTHONPATH": "/srv/worldbot", "HTTPS_PROXY": "http://proxy:3128", "OMP_NUM_THREADS": "2",
              "CAMEL_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1",
              "DISCORD_TOKEN": "d-secret", "TELEGRAM_BOT_TOKEN": "t-secret", "HF_TOKEN": "hf-secret",
              "PYTHON_KEYRING_PASSWORD": "k-secret", "AWS_SECRET_ACCESS_KEY": "aws", "DATABASE_URL": "postgres://",
              "MY_LLM_CREDS": "sk-llm", "OPENAI_API_KEY": "sk-other"}
    env = child_environment(parent, "MY_LLM_CREDS", {"OASIS_DB_PATH": "/tmp/x.db"})
    assert env == {"PATH": "/usr/bin", "HOME": "/home/bot", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
                   "PYTHONPATH": "/srv/worldbot", "HTTPS_PROXY": "http://proxy:3128", "OMP_NUM_THREADS": "2",
                   "CAMEL_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1", "MY_LLM_CREDS": "sk-llm",
                   "OASIS_DB_PATH": "/tmp/x.db"}
    assert "OPENAI_API_KEY" not in child_environment(parent, "")
