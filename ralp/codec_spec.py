"""What a --compression spec means, without TensorFlow: one parser, and top-k's k.

Read by the run settings' validation (bench/core/config.py), the cost model and the TF codecs
(strategies/codecs.py), so a spec accepted anywhere is understood everywhere: ``topk:1/100``
and ``topk:0.01`` are the same codec to all of them.
"""
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from ralp.errors import UserError

KINDS = ("none", "fp16", "int8", "topk")
VALID_SPECS = "none, fp16, int8, topk:<fraction in (0, 1]> (e.g. topk:0.01)"


@dataclass(frozen=True)
class CodecSpec:
    kind: str                            # none | fp16 | int8 | topk
    fraction: Optional[Fraction] = None  # topk: share of each tensor's entries sent
    text: str = "none"                   # the spelling given (normalised case and spaces)

    def k(self, elements: int) -> int:
        """Top-k entries sent for a tensor of ``elements``: max(1, ceil(fraction * n)), at most n."""
        n = int(elements)
        return min(n, max(1, math.ceil(self.fraction * n)))


def parse_codec(spec) -> CodecSpec:
    """``none``, ``fp16``, ``int8`` or ``topk:<fraction>`` (a decimal or a ratio such as 1/100);
    None means none. UserError naming the valid forms otherwise."""
    text = "none" if spec is None else str(spec).strip().lower()
    if text in ("", "none"):
        return CodecSpec("none")
    if text in ("fp16", "int8"):
        return CodecSpec(text, text=text)
    if text.startswith("topk:"):
        try:
            fraction = Fraction(text[5:])
        except (ValueError, ZeroDivisionError):
            raise UserError(f"--compression {spec!r}: {text[5:]!r} is not a number; valid codecs: {VALID_SPECS}") from None
        if not 0 < fraction <= 1:
            raise UserError(f"--compression {spec!r}: the fraction must be in (0, 1]; valid codecs: {VALID_SPECS}")
        return CodecSpec("topk", fraction, text)
    raise UserError(f"unknown --compression codec {spec!r}; valid codecs: {VALID_SPECS}")
