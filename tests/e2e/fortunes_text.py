"""Debian's fortunes as char-level token shards, for the e2e tests that
train a small tcc GPT (checkpoint_resume_test.py, amp_cpu_test.py)."""
import json
import os

FORTUNES = "/usr/share/games/fortunes"


def tokenize_fortunes(run, tcc_data, work, files=6):
    """Tokenizes the first `files` fortune files (not the .dat indexes nor
    the .u8 symlinks) with `tcc_data` into WORK/text_{train,val}.bin through
    `run` (the caller's checked subprocess runner). Returns the shard prefix
    WORK/text and the vocabulary size."""
    texts = sorted(os.path.join(FORTUNES, n) for n in os.listdir(FORTUNES)
                   if not n.endswith(".dat") and
                   os.path.isfile(os.path.join(FORTUNES, n)) and
                   not os.path.islink(os.path.join(FORTUNES, n)))[:files]
    data = os.path.join(work, "text")
    run([tcc_data, "tokenize", "--level", "char", "-o", data] + texts)
    with open(data + "_vocab.json") as f:
        return data, json.load(f)["vocab_size"]
