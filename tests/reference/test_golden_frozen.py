"""Every golden variant gives the same bits as frozen here, on every 16-bit pattern.

Each entry of the table is a :class:`Semantics` (as its fields), an alpha, the
directions and the dtype pairs it is computed for.  The inputs are every fp16 and bf16
pattern and a fixed random set of 2**16 float32 patterns (dy: the same set, permuted).
``DIGESTS`` holds the sha256 of each output (its first 24 hex digits, after the dtype),
computed once from the keyword golden that these records describe; an entry that
raised holds the exception's class.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conformance.dtypes import all_patterns, from_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics

F, B = ("forward",), ("backward",)
FB = F + B
SAME = (("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"))
CAST = (("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"))

# name, directions, alpha, Semantics fields, dtype pairs
_TABLE = [
    ("exact", FB, 0.2, {}, SAME + CAST),
    ("exact-neg", FB, -0.5, {}, SAME),
    ("slope-t", FB, 0.01, {"slope_dtype": "float16"}, SAME),
    ("slope-chain", FB, 0.3, {"slope_dtype": ("float32", "bfloat16")}, SAME),
    ("opmath32", FB, 0.2, {"opmath": "float32"}, SAME + CAST[:2]),
    ("opmath-bf16-ftz", F, 0.2, {"opmath": "bfloat16", "ftz": True}, (("float32", "float32"),)),
    ("flush", FB, 0.2, {"daz": True, "ftz": True}, SAME + CAST),
    ("daz", FB, 0.2, {"daz": True}, SAME),
    ("ftz", FB, 1 / 3, {"ftz": True}, SAME),
    ("saturate", FB, 1.5, {"saturate": True}, SAME + CAST[:2]),
    ("saturate-inf", FB, 1.5, {"saturate": "inf"}, SAME),
    ("narrow16", FB, 0.2, {"input_dtype": "float16"}, SAME + CAST[:2]),
    ("narrow-bf16", FB, 0.2, {"input_dtype": "bfloat16"}, SAME),
    ("xla", F, 0.2, {"daz": True, "ftz": True, "predicate": "ge", "slope_dtype": "float32"}, SAME),
    ("max", F, 1.5, {"formulation": "max"}, SAME),
    ("min", F, -0.5, {"formulation": "min"}, SAME),
    ("maxmin", F, 0.2, {"formulation": "maxmin"}, SAME),
    ("mask", F, 0.2, {"formulation": "mask-multiply"}, SAME + CAST[:2]),
    ("mask-opmath", F, 0.2, {"formulation": "mask-multiply", "opmath": "float32"}, CAST[:2]),
    ("relu", FB, 0.0, {"formulation": "relu"}, SAME),
    ("scale", FB, 0.2, {"formulation": "scale"}, SAME),
    ("max-or-min-x", F, 1.5, {"formulation": "max_or_min", "nan_operand": "x", "daz": True, "ftz": True}, SAME),
    ("max-or-min", F, 0.0, {"formulation": "max_or_min", "slope_dtype": "float16"}, SAME),
    ("twice", F, 0.3, {"formulation": "twice"}, SAME),
    ("twice-rtz", F, 0.3, {"formulation": "twice", "rounding": "rtz", "daz": True}, SAME),
    ("merge", F, 0.0, {"formulation": "merge"}, SAME),
    ("swap-branches", B, 0.2, {"formulation": "swap_branches"}, SAME),
    ("swap-operands", B, 0.2, {"formulation": "swap_operands"}, SAME + CAST[:1]),
    ("rtz", FB, 0.1, {"rounding": "rtz"}, SAME + CAST),
    ("rna", FB, 0.1, {"rounding": "rna", "opmath": "float32"}, SAME + CAST[:2]),
    ("result16", FB, 0.2, {"result_dtype": "float16"}, SAME + CAST[2:]),
    ("result-bf16", FB, 0.2, {"result_dtype": "bfloat16", "daz": True}, (("float16", "float32"),)),
    ("grad-ge", B, 0.2, {"grad_rule": "ge"}, SAME),
    ("grad-max", B, 0.5, {"grad_rule": "max", "grad_form": "sum", "slope_dtype": "float16"}, SAME),
    ("grad-max-flush", B, 1.5, {"grad_rule": "max", "daz": True, "ftz": True}, SAME),
    ("grad-result", B, -0.2, {"grad_rule": "result"}, SAME),
    ("grad-sum", B, 0.2, {"grad_rule": "ge", "grad_form": "sum", "daz": True}, SAME),
    ("grad-fma", B, 0.2, {"grad_rule": "ge", "grad_form": "fma", "daz": True, "ftz": True,
                          "slope_dtype": "float32"}, SAME),
    ("nan-dy", B, 0.2, {"nan_grad": "dy"}, SAME),
    ("nan-zero", B, 0.2, {"nan_grad": "zero"}, SAME),
    ("nan-dy0", B, 0.2, {"nan_grad": "dy*0", "grad_rule": "ge"}, SAME),
    ("nan-nan", B, 0.2, {"nan_grad": "nan", "saturate": True}, SAME),
    ("rounding-f64", FB, 0.2, {"rounding": "rtz"}, (("float64", "float64"),)),
]

#: (name, direction, alpha, (src, out), Semantics fields), one entry per call.
SETTINGS = [(name, d, alpha, pair, kw) for name, dirs, alpha, kw, pairs in _TABLE
            for d in dirs for pair in pairs]


def inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pattern of a 16-bit dtype, or a fixed random set of 2**16 patterns of a wider
    one; dy is the same set, permuted."""
    if dtype in ("float16", "bfloat16"):
        x = all_patterns(dtype)
    else:
        width = np.uint32 if dtype == "float32" else np.uint64
        bits = np.random.default_rng(2026).integers(0, np.iinfo(width).max, 1 << 16, dtype=width,
                                                    endpoint=True)
        x = from_bits(bits, dtype)
    return x, x[np.random.default_rng(7).permutation(x.size)]


DIGESTS = {
    'exact|forward|0.2|float16->float16': 'float16:675ab127b589da08d64d1a59',
    'exact|forward|0.2|bfloat16->bfloat16': 'bfloat16:e15cfddd501205466b51662f',
    'exact|forward|0.2|float32->float32': 'float32:5e389c57605b6d6ecf1ccba6',
    'exact|forward|0.2|float32->float16': 'float16:0a75ef4e8dddb756fdddb0be',
    'exact|forward|0.2|float32->bfloat16': 'bfloat16:e4f8afdd7e9cd51c3c130af6',
    'exact|forward|0.2|float16->float32': 'float32:2c5de9bdc0b683693d3ac7b7',
    'exact|forward|0.2|bfloat16->float32': 'float32:6bc0d46c54da59f35bb2ce83',
    'exact|backward|0.2|float16->float16': 'float16:454b03ba791cf655afa25627',
    'exact|backward|0.2|bfloat16->bfloat16': 'bfloat16:dc9786f1ca64df98e4ee6f60',
    'exact|backward|0.2|float32->float32': 'float32:cf912100b23732acf4637c8f',
    'exact|backward|0.2|float32->float16': 'float16:2ea3c32614c97d4b360ce8ca',
    'exact|backward|0.2|float32->bfloat16': 'bfloat16:e683d4206cfa796476056f65',
    'exact|backward|0.2|float16->float32': 'float32:1d5b630b13f945f1b232f315',
    'exact|backward|0.2|bfloat16->float32': 'float32:44f1af9f21fb7313828d8a22',
    'exact-neg|forward|-0.5|float16->float16': 'float16:a5396749c99308d1365cfd45',
    'exact-neg|forward|-0.5|bfloat16->bfloat16': 'bfloat16:15681bd014ef49cd266c51ea',
    'exact-neg|forward|-0.5|float32->float32': 'float32:0afe52c9f740089e9442a39f',
    'exact-neg|backward|-0.5|float16->float16': 'float16:888bfaf2246fa9635e8d5226',
    'exact-neg|backward|-0.5|bfloat16->bfloat16': 'bfloat16:ff262d087a0ffe318d74e6b1',
    'exact-neg|backward|-0.5|float32->float32': 'float32:494bd2db67f9ccb05d272ef7',
    'slope-t|forward|0.01|float16->float16': 'float16:29f05fe61330415a0d3a045f',
    'slope-t|forward|0.01|bfloat16->bfloat16': 'bfloat16:6e0bfea13137973b99c85107',
    'slope-t|forward|0.01|float32->float32': 'float32:e533c1ae5e4a344f27901fca',
    'slope-t|backward|0.01|float16->float16': 'float16:47e4da32e5ad060f72507014',
    'slope-t|backward|0.01|bfloat16->bfloat16': 'bfloat16:92f53fac8c8c1c8a4dd89d2f',
    'slope-t|backward|0.01|float32->float32': 'float32:9159af42782f71c14a87cbe7',
    'slope-chain|forward|0.3|float16->float16': 'float16:b61ed5ffac1859c3647c1499',
    'slope-chain|forward|0.3|bfloat16->bfloat16': 'bfloat16:79e701ddf9b47b7c1d4241f7',
    'slope-chain|forward|0.3|float32->float32': 'float32:a5db53d0e07aedca20408f0b',
    'slope-chain|backward|0.3|float16->float16': 'float16:1ab20fa3d88a9b07e0f3bec4',
    'slope-chain|backward|0.3|bfloat16->bfloat16': 'bfloat16:fa233fc5850bcf1a7ee4f6b6',
    'slope-chain|backward|0.3|float32->float32': 'float32:a4185ea9915220e83d576155',
    'opmath32|forward|0.2|float16->float16': 'float16:675ab127b589da08d64d1a59',
    'opmath32|forward|0.2|bfloat16->bfloat16': 'bfloat16:e15cfddd501205466b51662f',
    'opmath32|forward|0.2|float32->float32': 'float32:ac6ed89495d779558c836324',
    'opmath32|forward|0.2|float32->float16': 'float16:0a75ef4e8dddb756fdddb0be',
    'opmath32|forward|0.2|float32->bfloat16': 'bfloat16:e4f8afdd7e9cd51c3c130af6',
    'opmath32|backward|0.2|float16->float16': 'float16:454b03ba791cf655afa25627',
    'opmath32|backward|0.2|bfloat16->bfloat16': 'bfloat16:dc9786f1ca64df98e4ee6f60',
    'opmath32|backward|0.2|float32->float32': 'float32:28d9a90bc226d79de5511c59',
    'opmath32|backward|0.2|float32->float16': 'float16:e0a7e317515e012cd92bffb6',
    'opmath32|backward|0.2|float32->bfloat16': 'bfloat16:e683d4206cfa796476056f65',
    'opmath-bf16-ftz|forward|0.2|float32->float32': 'float32:66e64466ca81102d5b36f267',
    'flush|forward|0.2|float16->float16': 'float16:8dcf8f37dd8337b3587b7651',
    'flush|forward|0.2|bfloat16->bfloat16': 'bfloat16:7ae024d1fe2a0f66d7707539',
    'flush|forward|0.2|float32->float32': 'float32:ff2ba0d5da9392b37580fde0',
    'flush|forward|0.2|float32->float16': 'float16:c1bccfd758e114ec57023abf',
    'flush|forward|0.2|float32->bfloat16': 'bfloat16:7db49d18a84043aa9fce4524',
    'flush|forward|0.2|float16->float32': 'float32:28aa28c304c31fd8997b7370',
    'flush|forward|0.2|bfloat16->float32': 'float32:4623372605f8eb0bdaa1254a',
    'flush|backward|0.2|float16->float16': 'float16:9dc86ef9407349fa54d6cb91',
    'flush|backward|0.2|bfloat16->bfloat16': 'bfloat16:f609167d76ce85b32d5e89aa',
    'flush|backward|0.2|float32->float32': 'float32:5bc1ff27ece6f533a7083194',
    'flush|backward|0.2|float32->float16': 'float16:d3713b961f7b0b63bb780f77',
    'flush|backward|0.2|float32->bfloat16': 'bfloat16:0b82c91172f6d04160918766',
    'flush|backward|0.2|float16->float32': 'float32:07cf80b1c9ce7c46ff28ff8f',
    'flush|backward|0.2|bfloat16->float32': 'float32:191c8856a94a159113cdb370',
    'daz|forward|0.2|float16->float16': 'float16:ceb652396610d5ec503a8c7e',
    'daz|forward|0.2|bfloat16->bfloat16': 'bfloat16:ca4bde46b1679853c91b529d',
    'daz|forward|0.2|float32->float32': 'float32:dc06fc17410227a7ab6a4804',
    'daz|backward|0.2|float16->float16': 'float16:d0673e269cd533aa1855322e',
    'daz|backward|0.2|bfloat16->bfloat16': 'bfloat16:eb971a6deea8988e8bd6b388',
    'daz|backward|0.2|float32->float32': 'float32:761c2b274924656ca6eafd2a',
    'ftz|forward|0.3333333333333333|float16->float16': 'float16:4e9887b8aa786af8dd9fb0f8',
    'ftz|forward|0.3333333333333333|bfloat16->bfloat16': 'bfloat16:726f1afa2c1cf89d8590872a',
    'ftz|forward|0.3333333333333333|float32->float32': 'float32:523bb0bc4fff6b3370f357ee',
    'ftz|backward|0.3333333333333333|float16->float16': 'float16:c4c5c7b2e6cb8f4d699456d5',
    'ftz|backward|0.3333333333333333|bfloat16->bfloat16': 'bfloat16:c60b823b2655713b951f66f4',
    'ftz|backward|0.3333333333333333|float32->float32': 'float32:e850bea7fba778cb4fd68cf7',
    'saturate|forward|1.5|float16->float16': 'float16:9de3eea259dd1d59d214c72a',
    'saturate|forward|1.5|bfloat16->bfloat16': 'bfloat16:f05682380487eeb7b4338ebb',
    'saturate|forward|1.5|float32->float32': 'float32:97ca6e9647673c786340e70c',
    'saturate|forward|1.5|float32->float16': 'float16:6215a4ea5028e1575afc625a',
    'saturate|forward|1.5|float32->bfloat16': 'bfloat16:6eb726290d043ff4a8e604ff',
    'saturate|backward|1.5|float16->float16': 'float16:405001ae0bcd8c43eb8d7513',
    'saturate|backward|1.5|bfloat16->bfloat16': 'bfloat16:5ef1653e03d8595677e293d6',
    'saturate|backward|1.5|float32->float32': 'float32:47671a536ef2c5102bdfcadf',
    'saturate|backward|1.5|float32->float16': 'float16:2406bc573e52361cc2d58557',
    'saturate|backward|1.5|float32->bfloat16': 'bfloat16:8bf66ef0311bc773e47c2afe',
    'saturate-inf|forward|1.5|float16->float16': 'float16:6bad9c57ce1710275eab401c',
    'saturate-inf|forward|1.5|bfloat16->bfloat16': 'bfloat16:eb16be659c67dcdd805af18c',
    'saturate-inf|forward|1.5|float32->float32': 'float32:514b720fb9c34f253096e3d4',
    'saturate-inf|backward|1.5|float16->float16': 'float16:afdb4da881c17d1f7d56a92b',
    'saturate-inf|backward|1.5|bfloat16->bfloat16': 'bfloat16:985f70e8dc42ac28189376fd',
    'saturate-inf|backward|1.5|float32->float32': 'float32:3953c2d42a52f9443f8b2bfe',
    'narrow16|forward|0.2|float16->float16': 'float16:675ab127b589da08d64d1a59',
    'narrow16|forward|0.2|bfloat16->bfloat16': 'bfloat16:e75f832de11afd80eef142bd',
    'narrow16|forward|0.2|float32->float32': 'float32:d7767f443dbfea7cd509ed08',
    'narrow16|forward|0.2|float32->float16': 'float16:89004dd143003782d77aef96',
    'narrow16|forward|0.2|float32->bfloat16': 'bfloat16:6969f6804aaff868c32725fc',
    'narrow16|backward|0.2|float16->float16': 'float16:3356943bb86de1c678c91add',
    'narrow16|backward|0.2|bfloat16->bfloat16': 'bfloat16:5c6ec53d63248cb9ae43caf6',
    'narrow16|backward|0.2|float32->float32': 'float32:a4a1a0bf0b23bddcba76109b',
    'narrow16|backward|0.2|float32->float16': 'float16:b9298ddc9cd625dec42ed7ea',
    'narrow16|backward|0.2|float32->bfloat16': 'bfloat16:cb48309c215d0decb365ae99',
    'narrow-bf16|forward|0.2|float16->float16': 'float16:bc254f2c948cab95d5399e32',
    'narrow-bf16|forward|0.2|bfloat16->bfloat16': 'bfloat16:e15cfddd501205466b51662f',
    'narrow-bf16|forward|0.2|float32->float32': 'float32:ad29f12b66eacf79941279ce',
    'narrow-bf16|backward|0.2|float16->float16': 'float16:6b949b75e4c5a39d28edb202',
    'narrow-bf16|backward|0.2|bfloat16->bfloat16': 'bfloat16:de0bdf7144496c7a32119bae',
    'narrow-bf16|backward|0.2|float32->float32': 'float32:8e7f0a3b771b25ea60f88140',
    'xla|forward|0.2|float16->float16': 'float16:bfdb674e9c3c53a74ece2c19',
    'xla|forward|0.2|bfloat16->bfloat16': 'bfloat16:19159b2952388be9f1ca7d9c',
    'xla|forward|0.2|float32->float32': 'float32:9403c940cbb36f5789c21b0e',
    'max|forward|1.5|float16->float16': 'float16:b987649177b8c5a6bc62c71b',
    'max|forward|1.5|bfloat16->bfloat16': 'bfloat16:a2967823996343574854f872',
    'max|forward|1.5|float32->float32': 'float32:2ed58f03ad12ffc361c476ff',
    'min|forward|-0.5|float16->float16': 'float16:862d262b66506d6f64a1e940',
    'min|forward|-0.5|bfloat16->bfloat16': 'bfloat16:bc3aecdf10114c91803ff53f',
    'min|forward|-0.5|float32->float32': 'float32:4363c1d17c93a1b80b8cfbd5',
    'maxmin|forward|0.2|float16->float16': 'float16:d570c29edbc4e6f3f329966c',
    'maxmin|forward|0.2|bfloat16->bfloat16': 'bfloat16:94df6d3f10c73d17a0f02956',
    'maxmin|forward|0.2|float32->float32': 'float32:5e389c57605b6d6ecf1ccba6',
    'mask|forward|0.2|float16->float16': 'float16:b637caea94763b1d8e5c3f38',
    'mask|forward|0.2|bfloat16->bfloat16': 'bfloat16:f857f3482c53250668284923',
    'mask|forward|0.2|float32->float32': 'float32:5e389c57605b6d6ecf1ccba6',
    'mask|forward|0.2|float32->float16': 'float16:e10ec327d382bd9f7b98ccce',
    'mask|forward|0.2|float32->bfloat16': 'bfloat16:287ddcafcbc628185ed73ad9',
    'mask-opmath|forward|0.2|float32->float16': 'float16:e10ec327d382bd9f7b98ccce',
    'mask-opmath|forward|0.2|float32->bfloat16': 'bfloat16:287ddcafcbc628185ed73ad9',
    'relu|forward|0.0|float16->float16': 'float16:753a991d67d4088f2c220c25',
    'relu|forward|0.0|bfloat16->bfloat16': 'bfloat16:3a617d17f7d51fe75cf28ebb',
    'relu|forward|0.0|float32->float32': 'float32:6a62053a4f3d0a29492b1c1b',
    'relu|backward|0.0|float16->float16': 'float16:052f8d9691999d9756e43680',
    'relu|backward|0.0|bfloat16->bfloat16': 'bfloat16:20c9c344d6732c13682e4157',
    'relu|backward|0.0|float32->float32': 'float32:d2c7ea333e0cd9d6f815f009',
    'scale|forward|0.2|float16->float16': 'float16:3848fcf2bfea43226a014172',
    'scale|forward|0.2|bfloat16->bfloat16': 'bfloat16:5f154c0026746697526d8829',
    'scale|forward|0.2|float32->float32': 'float32:56061de4bb0cace52971a392',
    'scale|backward|0.2|float16->float16': 'float16:87019c053a8a31c553d5e84c',
    'scale|backward|0.2|bfloat16->bfloat16': 'bfloat16:dde79232e0ff756dd918b4ec',
    'scale|backward|0.2|float32->float32': 'float32:628b8ec2834d02a1824f48d0',
    'max-or-min-x|forward|1.5|float16->float16': 'float16:47cefe0a4fe675fcb49c2a01',
    'max-or-min-x|forward|1.5|bfloat16->bfloat16': 'bfloat16:59d63fe6de75f39a69bd3e75',
    'max-or-min-x|forward|1.5|float32->float32': 'float32:9a266f4ef0ea2340775052bf',
    'max-or-min|forward|0.0|float16->float16': 'float16:3c0bf766c58f63628bc13bd3',
    'max-or-min|forward|0.0|bfloat16->bfloat16': 'bfloat16:6bd59383a3246c1f0ce4acc6',
    'max-or-min|forward|0.0|float32->float32': 'float32:3534e541f9bbb683fc317ab4',
    'twice|forward|0.3|float16->float16': 'float16:8ededd91c78b21b07441f929',
    'twice|forward|0.3|bfloat16->bfloat16': 'bfloat16:2b106f202b710ab2080caebc',
    'twice|forward|0.3|float32->float32': 'float32:5c0f678cb853b5c975bb26fa',
    'twice-rtz|forward|0.3|float16->float16': 'float16:cd944c8e2ac1a786caf9b692',
    'twice-rtz|forward|0.3|bfloat16->bfloat16': 'bfloat16:3843ee217a1686e19c6bc305',
    'twice-rtz|forward|0.3|float32->float32': 'float32:93143bcbbb45cc8ffbab6c4c',
    'merge|forward|0.0|float16->float16': 'float16:bba525090cc3364f574b3d5e',
    'merge|forward|0.0|bfloat16->bfloat16': 'bfloat16:88ccfea4a24bfad895398004',
    'merge|forward|0.0|float32->float32': 'float32:8026ca3a982ba1c1790b0ae4',
    'swap-branches|backward|0.2|float16->float16': 'float16:43bc17b2bf6ad3f8b5fa65b4',
    'swap-branches|backward|0.2|bfloat16->bfloat16': 'bfloat16:5d27a81b52e5597fbac4c31b',
    'swap-branches|backward|0.2|float32->float32': 'float32:d04f04692cf1707712af61b9',
    'swap-operands|backward|0.2|float16->float16': 'float16:9a56f4c30e1bb9f249087f6d',
    'swap-operands|backward|0.2|bfloat16->bfloat16': 'bfloat16:4d9e7570a8752f31f3d654f6',
    'swap-operands|backward|0.2|float32->float32': 'float32:9c152c8c97978a098374bc82',
    'swap-operands|backward|0.2|float32->float16': 'float16:b67675524cda609be5e8c6b3',
    'rtz|forward|0.1|float16->float16': 'float16:d923c7a67f1cfedf73c9af06',
    'rtz|forward|0.1|bfloat16->bfloat16': 'bfloat16:3918cfd9dd544e814805fd6e',
    'rtz|forward|0.1|float32->float32': 'float32:1750cdd45a8a64afcce95900',
    'rtz|forward|0.1|float32->float16': 'float16:b86292fd1e5dda2f6b6de120',
    'rtz|forward|0.1|float32->bfloat16': 'bfloat16:62e8fab5eee86f25248a21a3',
    'rtz|forward|0.1|float16->float32': 'float32:76a4f65108271e9a578b7565',
    'rtz|forward|0.1|bfloat16->float32': 'float32:f09311479006b3c88b7661bb',
    'rtz|backward|0.1|float16->float16': 'float16:06af5e29d304fa42e9b20919',
    'rtz|backward|0.1|bfloat16->bfloat16': 'bfloat16:b32dc1d8e8b27413f0aa0b38',
    'rtz|backward|0.1|float32->float32': 'float32:b0156ea882a103d3457bf002',
    'rtz|backward|0.1|float32->float16': 'float16:f8c29fa1bddf9a2a0c33ac8b',
    'rtz|backward|0.1|float32->bfloat16': 'bfloat16:fa18c7d272861a5c62cd208a',
    'rtz|backward|0.1|float16->float32': 'float32:264b0289ca13e15b64ab711c',
    'rtz|backward|0.1|bfloat16->float32': 'float32:5104d764c27d88e65bdadf37',
    'rna|forward|0.1|float16->float16': 'float16:de4ae11a4252cb04b1b40172',
    'rna|forward|0.1|bfloat16->bfloat16': 'bfloat16:68fc65af20a12ecd5924e2ee',
    'rna|forward|0.1|float32->float32': 'float32:0ae4700da14148eb47a84f7f',
    'rna|forward|0.1|float32->float16': 'float16:151337f1b4168826fc7aca91',
    'rna|forward|0.1|float32->bfloat16': 'bfloat16:9eff64feec943c88fa8c9ca2',
    'rna|backward|0.1|float16->float16': 'float16:5c4ebe39e93514382494c0fe',
    'rna|backward|0.1|bfloat16->bfloat16': 'bfloat16:c555637225dcd78c2928250b',
    'rna|backward|0.1|float32->float32': 'float32:f6c5be8c95ec7ece331eb5b8',
    'rna|backward|0.1|float32->float16': 'float16:3fc66f3ca6302c254a405a5f',
    'rna|backward|0.1|float32->bfloat16': 'bfloat16:24230e58d200dee9d75d09b8',
    'result16|forward|0.2|float16->float16': 'float16:675ab127b589da08d64d1a59',
    'result16|forward|0.2|bfloat16->bfloat16': 'bfloat16:ced718fb6e9e09d6db365b9d',
    'result16|forward|0.2|float32->float32': 'float32:c174093ee3f31ba150bf136b',
    'result16|forward|0.2|float16->float32': 'float32:2ac4d2605250281c0831c95d',
    'result16|forward|0.2|bfloat16->float32': 'float32:d15a03d2e165d26c0ea25e98',
    'result16|backward|0.2|float16->float16': 'float16:454b03ba791cf655afa25627',
    'result16|backward|0.2|bfloat16->bfloat16': 'bfloat16:2fdf4bf0fb8aaf18be44cd00',
    'result16|backward|0.2|float32->float32': 'float32:facc863cdec3e2807aebed8f',
    'result16|backward|0.2|float16->float32': 'float32:c465bd314384ce7af45deb19',
    'result16|backward|0.2|bfloat16->float32': 'float32:db09c7ab1c02a2924df021ca',
    'result-bf16|forward|0.2|float16->float32': 'float32:2751ea11749321ef6977b035',
    'result-bf16|backward|0.2|float16->float32': 'float32:2a66ce5a4a0a31d6252e557c',
    'grad-ge|backward|0.2|float16->float16': 'float16:04aed83e6e06d0dd7a8801fa',
    'grad-ge|backward|0.2|bfloat16->bfloat16': 'bfloat16:722795e5259ff4c5c2c23995',
    'grad-ge|backward|0.2|float32->float32': 'float32:cf912100b23732acf4637c8f',
    'grad-max|backward|0.5|float16->float16': 'float16:0e30737b6606a7e0da3514d3',
    'grad-max|backward|0.5|bfloat16->bfloat16': 'bfloat16:37bc893c0c60dffbda79db83',
    'grad-max|backward|0.5|float32->float32': 'float32:c54af070baff39cf10714db3',
    'grad-max-flush|backward|1.5|float16->float16': 'float16:dcd048eb023ea7d692318eab',
    'grad-max-flush|backward|1.5|bfloat16->bfloat16': 'bfloat16:8d6b96bf5c3c2706a69aea75',
    'grad-max-flush|backward|1.5|float32->float32': 'float32:399c315d3ebb6d284b028a52',
    'grad-result|backward|-0.2|float16->float16': 'float16:449d211f0378fd7db6145bc7',
    'grad-result|backward|-0.2|bfloat16->bfloat16': 'bfloat16:ca8b8e49252d14b5c97978a5',
    'grad-result|backward|-0.2|float32->float32': 'float32:c6fdd79dd078deebf26d7264',
    'grad-sum|backward|0.2|float16->float16': 'float16:77ec0a666900bb4634587dbf',
    'grad-sum|backward|0.2|bfloat16->bfloat16': 'bfloat16:e893f7c4a8b8d9e3c776bfbb',
    'grad-sum|backward|0.2|float32->float32': 'float32:9170edb46a4ae100754fb8d0',
    'grad-fma|backward|0.2|float16->float16': 'float16:d988aab023c1a635e73e1c4b',
    'grad-fma|backward|0.2|bfloat16->bfloat16': 'bfloat16:4966211e387a0c1d0753b4a2',
    'grad-fma|backward|0.2|float32->float32': 'float32:750373bb24dd182ab43418fc',
    'nan-dy|backward|0.2|float16->float16': 'float16:47778dc8b806d695095547d0',
    'nan-dy|backward|0.2|bfloat16->bfloat16': 'bfloat16:52c78d28fedf9a9cd8533a88',
    'nan-dy|backward|0.2|float32->float32': 'float32:2aafd4e7000eb48b466912d0',
    'nan-zero|backward|0.2|float16->float16': 'float16:3a0e8cfb4adb1c68efefd519',
    'nan-zero|backward|0.2|bfloat16->bfloat16': 'bfloat16:71f316fec91acf180183ca50',
    'nan-zero|backward|0.2|float32->float32': 'float32:3088d8d4a2dd8d85cb4e727c',
    'nan-dy0|backward|0.2|float16->float16': 'float16:ba76f21d903e5574d7e2884c',
    'nan-dy0|backward|0.2|bfloat16->bfloat16': 'bfloat16:c049cbf8d48d03a52a6ee0db',
    'nan-dy0|backward|0.2|float32->float32': 'float32:6261bf69d695c45ac69c92f7',
    'nan-nan|backward|0.2|float16->float16': 'float16:61a83811c11efe51caca55f7',
    'nan-nan|backward|0.2|bfloat16->bfloat16': 'bfloat16:42bc08de38d20ec1d8db73fe',
    'nan-nan|backward|0.2|float32->float32': 'float32:df975a9c004ab2bde46d4bf0',
    'rounding-f64|forward|0.2|float64->float64': 'raises ValueError',
    'rounding-f64|backward|0.2|float64->float64': 'raises ValueError',
}


def _digest(name: str, direction: str, alpha: float, pair: tuple[str, str], fields: dict) -> str:
    src, out = pair
    x, dy = inputs(src)
    try:
        y = golden.compute(direction, x, alpha, dy=dy, out_dtype=out, semantics=Semantics(**fields))
    except ValueError as e:
        return "raises " + type(e).__name__
    return y.dtype.name + ":" + hashlib.sha256(np.ascontiguousarray(y).tobytes()).hexdigest()[:24]


def _key(name: str, direction: str, alpha: float, pair: tuple[str, str]) -> str:
    return f"{name}|{direction}|{alpha!r}|{pair[0]}->{pair[1]}"


@pytest.mark.parametrize("name,direction,alpha,pair,fields", SETTINGS,
                         ids=[_key(*s[:4]) for s in SETTINGS])
def test_golden_variant_output_is_unchanged(name: str, direction: str, alpha: float,
                                            pair: tuple[str, str], fields: dict) -> None:
    assert _digest(name, direction, alpha, pair, fields) == DIGESTS[_key(name, direction, alpha, pair)]


def test_every_frozen_digest_has_its_setting() -> None:
    assert sorted(_key(*s[:4]) for s in SETTINGS) == sorted(DIGESTS)
