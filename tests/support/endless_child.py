"""`python tests/support/endless_child.py TOKENIZER_DIR ARGS...` is `python -m eval ARGS...` in which a
sentence that starts with hold_fixtures.ENDLESS_TEXT never ends: a test kills this real second
process where it chooses, not where the run happens to be (tests/eval/runs/test_resume.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from transformers import AutoTokenizer  # noqa: E402

from eval.cli import main  # noqa: E402
from tests.support.hold_fixtures import endless_text_patch  # noqa: E402

if __name__ == "__main__":
    endless_text_patch(AutoTokenizer.from_pretrained(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
