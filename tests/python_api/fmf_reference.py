"""Independent NumPy references for the matched-filter tests, written from the definitions in
Fast Matched Filter's documentation (shapes), docs/mfilter.md (the formula, the flat rule and the
off-data rule) and EQcorrscan's `array_xcorr` contract; nothing here calls halfscope.

Everything is computed in float64 by direct sliding-window dot products (no running sums, no FFT),
so the only rounding is that of K-term FP64 dot products: ~K u64 relative, negligible next to the
float32 output of halfscope.
"""
import numpy as np

# A window whose energy (after demeaning in full normalization) is at most this fraction of its
# raw sum of squares is "flat" and contributes CC = 0 (docs/mfilter.md, "The flat rule").
FLAT_RELATIVE = 1e-12


def _as_network(templates, moveouts, weights, data):
    """Brings FMF's argument shapes to (T, S, C, K), (T, S, C), (T, S, C), (S, C, L) float64 /
    int64, and returns them with the layout tag ('4d', '3d' or 'single') needed to shape the
    output as FMF does."""
    templates = np.asarray(templates, np.float64)
    data = np.asarray(data, np.float64)
    if templates.ndim == data.ndim:  # one template (FMF: n_templates = 1)
        templates = templates[None]
        layout = "single"
        moveouts = None if moveouts is None else np.asarray(moveouts)[None]
        weights = None if weights is None else np.asarray(weights)[None]
    else:
        layout = "4d" if templates.ndim == 4 else "3d"
    if templates.ndim == 3:  # (T, N, K) traces -> stations with one component
        templates = templates[:, :, None, :]
        data = data[:, None, :]
    if templates.ndim != 4 or data.ndim != 3 or templates.shape[1:3] != data.shape[:2]:
        raise ValueError(f"incompatible shapes: templates {templates.shape}, data {data.shape}")
    T, S, C, _ = templates.shape

    def per_channel(a, default, dtype):
        if a is None:
            return np.full((T, S, C), default, dtype)
        a = np.asarray(a, dtype)
        if a.size == T * S:  # (T, S): the same value for every component of a station (FMF)
            return np.repeat(a.reshape(T, S, 1), C, axis=2)
        return a.reshape(T, S, C)

    return (templates, per_channel(moveouts, 0, np.int64), per_channel(weights, 1.0, np.float64),
            data, layout)


def channel_cc(template, trace, starts, normalize="short"):
    """CC of one template channel against one data channel for the windows starting at `starts`.

    Parameters
    ----------
    template : (K,) array
    trace : (L,) array
    starts : (n,) int array
        Window starts (correlation time times step plus the moveout).
    normalize : {'short', 'full'}
        'full' demeans the template and each window first.

    Returns
    -------
    (n,) float64 array: 0 for windows off the data, flat windows or a flat template channel;
    otherwise sum(t w) / sqrt(sum t^2 sum w^2), clipped to [-1, 1].
    """
    template = np.asarray(template, np.float64)
    trace = np.asarray(trace, np.float64)
    K, L = template.size, trace.size
    out = np.zeros(len(starts))
    raw_t = template @ template
    if normalize == "full":
        template = template - template.mean()
    tt = template @ template
    if tt == 0 or tt <= FLAT_RELATIVE * raw_t:
        return out
    inside = (starts >= 0) & (starts + K <= L)
    if not inside.any():
        return out
    windows = np.lib.stride_tricks.sliding_window_view(trace, K)[starts[inside]]
    raw_w = np.einsum("ij,ij->i", windows, windows)
    if normalize == "full":
        windows = windows - windows.mean(axis=1, keepdims=True)
    ww = np.einsum("ij,ij->i", windows, windows)
    flat = (ww == 0) | (ww <= FLAT_RELATIVE * raw_w)
    cc = windows @ template / np.sqrt(tt * np.where(flat, 1.0, ww))
    out[inside] = np.where(flat, 0.0, np.clip(cc, -1.0, 1.0))
    return out


def matched_filter(templates, moveouts, weights, data, step=1, normalize="short",
                   network_sum=True):
    """Fast Matched Filter's `matched_filter` from its definition, in float64.

    Parameters
    ----------
    templates : (T, S, C, K) | (T, N, K) | one template with data's rank
    moveouts, weights : (T, S, C) | (T, S) (repeated over components) | (T, N), or None (0 / 1)
    data : (S, C, L) | (N, L)
    step : int
        Samples between correlation times; n_corr = (L - K) // step + 1.
    normalize : {'short', 'full'}
    network_sum : bool
        True: cc_sum[t, i] = sum_{s,c} w[t,s,c] CC_{s,c}(t, i), shape (T, n_corr). False: the
        unweighted per-channel CC, (T, S, C, n_corr) or (T, N, n_corr) (FMF's docstring layout).

    Returns
    -------
    float64 array as described above.
    """
    tpl, mv, w, d, layout = _as_network(templates, moveouts, weights, data)
    T, S, C, K = tpl.shape
    n_corr = (d.shape[2] - K) // step + 1
    cc = np.zeros((T, S, C, n_corr))
    base = np.arange(n_corr, dtype=np.int64) * step
    for t in range(T):
        for s in range(S):
            for c in range(C):
                cc[t, s, c] = channel_cc(tpl[t, s, c], d[s, c], base + mv[t, s, c], normalize)
    if network_sum:
        return np.einsum("tsc,tsci->ti", w, cc)
    return cc if layout == "4d" or (layout == "single" and np.ndim(data) == 3) else cc[:, :, 0]


def normxcorr(templates, stream, pads):
    """EQcorrscan's `array_xcorr` contract in float64: full normalization (demeaned template and
    window), a template with any NaN gives a row of zeros and is reported unused, a flat window
    gives 0, and row i is shifted left by pads[i] with zeros filling the end.

    Parameters
    ----------
    templates : (n_t, K) array
    stream : (L,) array
    pads : sequence of n_t non-negative ints

    Returns
    -------
    (ccc (n_t, L - K + 1) float64, used_chans (n_t,) bool)
    """
    templates = np.asarray(templates, np.float64)
    stream = np.asarray(stream, np.float64)
    n_t, K = templates.shape
    n = stream.size - K + 1
    used = ~np.isnan(templates).any(axis=1)
    ccc = np.zeros((n_t, n))
    starts = np.arange(n)
    for i in range(n_t):
        if not used[i]:
            continue
        row = channel_cc(templates[i], stream, starts, "full")
        pad = int(pads[i])
        ccc[i, :n - pad] = row[pad:]
    return ccc, used


def detect(cc_sum, threshold, min_separation, step=1):
    """Peaks of |cc_sum| per template row strictly above `threshold` (absolute), local maxima
    (>= both neighbours), declustered strongest first: a weaker peak whose distance d (in
    correlation times) satisfies d * step <= min_separation from a kept one is dropped
    (docs/mfilter.md, "Detection").

    Returns
    -------
    list of (template, correlation index) pairs, sorted by template then index.
    """
    found = []
    for t, row in enumerate(np.abs(np.asarray(cc_sum, np.float64))):
        left = np.concatenate(([-np.inf], row[:-1]))
        right = np.concatenate((row[1:], [-np.inf]))
        cand = np.flatnonzero((row > threshold) & (row >= left) & (row >= right))
        # strongest first; ties broken by the earlier index (a stable sort on -value)
        order = cand[np.argsort(-row[cand], kind="stable")]
        kept = []
        for i in order:
            if all(abs(int(i) - k) * step > min_separation for k in kept):
                kept.append(int(i))
        found += [(t, i) for i in sorted(kept)]
    return found
