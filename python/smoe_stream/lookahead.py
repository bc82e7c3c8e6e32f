"""The router lookahead for stream_experts (lookahead=True), as smoe-llama's
(integrations/llama.cpp/lookahead.c): when layer L's router input is about
to be computed, guess layer L+1's experts from the hidden state at hand and
pass them to the library as hints (smoe_prefetch_hint), so that their reads
overlap layer L's experts and layer L+1's attention.

When: the guess is made as layer L's post-attention norm runs and hinted
once layer L's experts are claimed (its demand goes first), before they
compute.

The hidden state: the input of layer L's post-attention norm, the residual
stream after L's attention. Layer L+1's router really sees that plus L's
MoE output and L+1's attention, normalised by L+1's norm; the lookahead
applies L+1's norm (RMSNorm with its weight and epsilon) and L+1's router
(weight, and bias where it has one) to it, leaving out the two
contributions not computed yet, and takes each token's top-k.

The probability passed with each hint is calibrated by the lookahead's own
record, as in smoe-llama: for a guess of rank r, the share of earlier
guesses of that rank that the next layer then chose, (true + 1) /
(hints + 2); an expert several tokens guess gets 1 - prod(1 - p_r).

Nothing here changes what the model computes: hooks read the hidden state
and the routing, and the hints only start reads. stats() gains
lookahead_hints (hints passed), lookahead_layers (routings guessed),
lookahead_demanded (experts the guessed layers then chose, counted per
token), lookahead_true (of those, guessed for that token) and
lookahead_recall (true / demanded).
"""
import torch

from .errors import RingTooSmall

NORM_NAMES = ("post_attention_layernorm", "ffn_norm", "post_attention_norm")


def _norm_of(layer):
    for n in NORM_NAMES:
        m = getattr(layer, n, None)
        if m is not None and torch.is_tensor(getattr(m, "weight", None)):
            return m
    return None


def _router_of(layer):
    block = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
    for n in ("gate", "router"):
        m = getattr(block, n, None) if block is not None else None
        w = getattr(m, "weight", None) if m is not None else None
        if torch.is_tensor(w) and w.dim() == 2:
            return m
    return None


def _eps(norm):
    for a in ("variance_epsilon", "eps", "epsilon"):
        v = getattr(norm, a, None)
        if isinstance(v, float):
            return v
    return 1e-6


def _chosen_per_token(out, k):
    """[T, k] expert ids from a router's output: its integer tensor if it
    returns one, else the top-k of its (floating) scores."""
    ts = out if isinstance(out, (tuple, list)) else (out,)
    for t in ts:
        if torch.is_tensor(t) and not t.is_floating_point() and t.dtype != torch.bool:
            return t.reshape(-1, t.shape[-1])
    for t in ts:
        if torch.is_tensor(t) and t.is_floating_point() and t.dim() >= 1:
            return torch.topk(t.reshape(-1, t.shape[-1]), min(k, t.shape[-1]), dim=-1).indices
    return None


class Lookahead:
    def __init__(self, streamed, layers, top_k):
        self.h = streamed
        self.k = top_k
        self.hints = [0] * top_k  # per rank: guesses made and checked
        self.true = [0] * top_k
        self.n_hints = self.n_layers = self.demanded = self.hit = 0
        self.pending = {}  # layer -> [T, k] guesses waiting for that layer's routing
        self.unhinted = {}  # layer L -> (L + 1, guesses) to hint once L's experts are claimed
        self.hooks = []
        by_index = {}
        for i, layer in enumerate(layers):
            norm, router = _norm_of(layer), _router_of(layer)
            if norm is not None and router is not None:
                by_index[i] = (norm, router)
        for i, (norm, _) in by_index.items():
            nxt = by_index.get(i + 1)
            if nxt is not None:
                self.hooks.append(norm.register_forward_pre_hook(self._guesser(i + 1, *nxt)))
        for i, (_, router) in by_index.items():
            self.hooks.append(router.register_forward_hook(self._checker(i)))

    def _guesser(self, nxt, norm, router):
        w = router.weight
        b = getattr(router, "bias", None)
        eps = _eps(norm)

        def hook(_mod, args):
            x = args[0] if args else None
            if not torch.is_tensor(x):
                return None
            with torch.no_grad():
                x = x.reshape(-1, x.shape[-1]).float()
                x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                x = x * norm.weight.float()
                logits = x @ w.float().t()
                if torch.is_tensor(b):
                    logits = logits + b.float()
                guess = torch.topk(logits, min(self.k, logits.shape[-1]), dim=-1).indices.cpu()
            self.pending[nxt] = guess
            self.unhinted[nxt - 1] = (nxt, guess)
            return None
        return hook

    def after_demand(self, layer):
        """Layer `layer`'s experts are claimed (its demand went first): hint
        the guesses made for the next layer, as smoe-llama does at the same
        point, so that their reads overlap this layer's expert compute."""
        got = self.unhinted.pop(layer, None)
        if got is not None:
            self._hint(*got)

    def _hint(self, layer, guess):
        p_rank = [(self.true[r] + 1) / (self.hints[r] + 2) for r in range(guess.shape[1])]
        miss = {}
        for row in guess.tolist():
            for r, e in enumerate(row):
                miss[e] = miss.get(e, 1.0) * (1.0 - p_rank[r])
        st = self.h.stream
        for e, q in sorted(miss.items(), key=lambda kv: kv[1]):
            try:
                st.prefetch_hint(layer, e, min(1.0, max(0.0, 1.0 - q)))
                self.n_hints += 1
            except RingTooSmall:
                break

    def _checker(self, layer):
        def hook(_mod, _inp, out):
            guess = self.pending.pop(layer, None)
            if guess is None:
                return None
            got = _chosen_per_token(out, self.k)
            if got is None or got.shape[0] != guess.shape[0]:
                return None
            got = got.cpu().tolist()
            self.n_layers += 1
            for row_g, row_t in zip(guess.tolist(), got):
                want = set(row_t)
                self.demanded += len(want)
                for r, e in enumerate(row_g):
                    self.hints[r] += 1
                    if e in want:
                        self.true[r] += 1
                        self.hit += 1
            return None
        return hook

    def stats(self):
        return {"lookahead_hints": self.n_hints, "lookahead_layers": self.n_layers,
                "lookahead_demanded": self.demanded, "lookahead_true": self.hit,
                "lookahead_recall": self.hit / self.demanded if self.demanded else 0.0}

    def remove(self):
        for hk in self.hooks:
            hk.remove()
        self.hooks = []
