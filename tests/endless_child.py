"""`python tests/endless_child.py TOKENIZER_DIR ARGS...` is `python -m eval ARGS...` in which a
sentence that starts with hold_fixtures.ENDLESS_TEXT never ends: a test kills this real second
process where it chooses, not where the run happens to be (test_eval_resume.py)."""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from transformers import AutoTokenizer  # noqa: E402

from eval.cli import main  # noqa: E402
from hold_fixtures import endless_text_patch  # noqa: E402

if __name__ == "__main__":
    endless_text_patch(AutoTokenizer.from_pretrained(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
