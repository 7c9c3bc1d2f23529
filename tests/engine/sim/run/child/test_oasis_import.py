"""The run's child imports camel-oasis without torch, transformers, sentence-transformers and
scikit-learn (``engine.sim.run.child.oasis_import``): no placeholder is left in ``sys.modules`` (a
later import finds the real library), the offline recommenders work, and what oasis bound to an
absent library fails in one clear line when used. In a fresh interpreter, as in the child (this
process may hold torch)."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import json, sys
from engine.sim.run.child.oasis_import import ML_MODULES, load_oasis
load_oasis()
from oasis import Platform
from oasis.social_platform import recsys
loaded = [name for name in ML_MODULES if name in sys.modules]
feeds = [recsys.rec_sys_random([{"post_id": 1}, {"post_id": 2}], [[], []], 2),
         recsys.rec_sys_reddit([{"post_id": 1}], [[]], 2)]
try:
    recsys.tfidf_vectorizer.fit_transform(["a post"])
    error = None
except RuntimeError as err:
    error = str(err)
print(json.dumps({"loaded": loaded, "feeds": feeds, "error": error}))
"""


def test_oasis_imports_without_the_ml_libraries_and_the_run_s_recommenders_work(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["loaded"] == []
    assert seen["feeds"] == [[[1, 2], [1, 2]], [[1]]]
    assert seen["error"] == ("sklearn.feature_extraction.text.TfidfVectorizer() is not loaded in the "
                             "simulation run: only the offline recommenders (random, reddit) are usable")
