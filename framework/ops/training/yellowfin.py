"""YellowFin (Caffe2's sgd/yellowfin_op): momentum SGD whose learning rate and momentum tune
themselves from running gradient statistics (https://arxiv.org/abs/1706.03471)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import BOOL, FLOAT, INT, Arg
from framework.ops.training.optimizers import UpdateOp, update_op

_F = np.float32
_NAMES = ["param", "moment", "lr", "mu", "curv_win", "g_avg", "g2_avg", "scalars_memory"]


@update_op(
    "YellowFin",
    tuple(range(8)),
    inputs=10,
    outputs=8,
    args=[
        Arg("beta", FLOAT, 0.999, "coefficient of the moving averages"),
        Arg("curv_win_width", INT, 20, "how many recent curvatures (log squared gradient norms) are kept"),
        Arg("epsilon", FLOAT, 1e-6, "lower clip of norms, curvatures and the variance"),
        Arg("nesterov", BOOL, False, "Nesterov momentum"),
        Arg("zero_debias", BOOL, True, "divide moving averages by 1 - beta^iter"),
    ],
    input_docs=[
        ("param", "parameters"),
        ("moment", "momentum"),
        ("lr", "float [1]: moving average of the learning rate"),
        ("mu", "float [1]: moving average of the momentum coefficient"),
        ("curv_win", "float [curv_win_width]: latest log squared gradient norms"),
        ("g_avg", "moving average of the gradient"),
        ("g2_avg", "moving average of the squared gradient"),
        ("scalars_memory", "float [5]: averages of |g|, |g|^2, curvature min/max, distance"),
        ("grad", "gradient"),
        ("iter", "int64 iteration number (>= 1)"),
    ],
    output_docs=[(f"output_{n}", f"updated {n}") for n in _NAMES],
    allow_inplace={(i, i) for i in range(8)},
)
class YellowFin(UpdateOp):
    """One YellowFin step, as Caffe2's: first a momentum SGD step with the *current* averaged lr and
    mu (``m' = mu m + lr g``; ``p' = p - m'``, or Nesterov ``p' = p - (1 + mu) m' + mu m``), then the
    statistics are updated (moving averages with factor ``beta``, debiased by ``1 - beta^iter``), and
    from iteration 2 on a new lr/mu is solved from the curvature range, gradient variance and
    distance to the optimum and folded into the lr/mu averages.

    Caffe2 reads the averaged lr/mu from the output buffers, so it is defined when the op runs in
    place (as the optimizer builds it); here the input values are used either way."""

    def setup(self) -> None:
        if self.args.curv_win_width <= 0:
            raise self.arg_error(f"curv_win_width must be > 0, got {self.args.curv_win_width}")

    def run(self) -> None:
        a = self.args
        ins = [self.input(i) for i in range(9)]
        for i, x in enumerate(ins):
            if x.dtype != _F:
                raise TypeMismatchError(f"{self.describe()}: input {i} ('{self.input_names[i]}') must be float32")
        p, m, lr_avg, mu_avg, win, g_avg, g2_avg, mem, g = ins
        for i in (1, 5, 6, 8):
            if ins[i].shape != p.shape:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') must be shaped as param {list(p.shape)}"
                )
        if lr_avg.size != 1 or mu_avg.size != 1 or mem.size != 5 or win.size != a.curv_win_width:
            raise ShapeError(
                f"{self.describe()}: lr and mu need 1 element, scalars_memory 5 and curv_win curv_win_width "
                f"({a.curv_win_width}); got {lr_avg.size}, {mu_avg.size}, {mem.size}, {win.size}"
            )
        it_arr = self.input(9)
        if it_arr.dtype != np.int64 or it_arr.size != 1:
            raise TypeMismatchError(f"{self.describe()}: iter must be an int64 tensor of one element")
        it = int(it_arr.reshape(-1)[0])
        beta, eps = _F(a.beta), _F(a.epsilon)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            deb = _F(1) / (_F(1) - _F(beta**it)) if a.zero_debias else _F(1)
        mu0, lr0 = _F(mu_avg.reshape(-1)[0]), _F(lr_avg.reshape(-1)[0])
        new_m = mu0 * m + lr0 * g
        new_p = p - (_F(1) + mu0) * new_m + mu0 * m if a.nesterov else p - new_m

        def ma(x, avg):
            new = beta * avg + (_F(1) - beta) * x
            return new.astype(_F), (new * deb).astype(_F)

        s = mem.reshape(-1).astype(_F)
        new_s = s.copy()
        new_g_avg, g_deb = ma(g, g_avg)
        new_g2_avg, _ = ma(g * g, g2_avg)
        g_norm2 = max(_F(np.dot(g.reshape(-1), g.reshape(-1))), eps)
        new_s[1], g_norm2_deb = ma(g_norm2, s[1])
        g_norm = _F(np.sqrt(g_norm2))
        new_s[0], _ = ma(g_norm, s[0])
        new_win = win.reshape(-1).copy()
        new_win[(it - 1) % a.curv_win_width] = np.log(g_norm2)
        valid = new_win[: min(a.curv_win_width, max(it, 1))]
        new_s[2], min_deb = ma(_F(valid.min()), s[2])
        new_s[3], max_deb = ma(_F(valid.max()), s[3])
        min_deb, max_deb = max(_F(np.exp(min_deb)), eps), max(_F(np.exp(max_deb)), eps)
        variance = max(_F(g_norm2_deb - np.dot(g_deb.reshape(-1), g_deb.reshape(-1))), eps)
        distance = _F(new_s[0] / new_s[1])
        new_s[4], distance_deb = ma(distance, s[4])
        new_lr_avg, new_mu_avg = lr0, mu0
        if it > 1:
            curv_ratio = _F(np.sqrt(max_deb / min_deb))
            mu_limit = (curv_ratio - _F(1)) / (curv_ratio + _F(1))
            pre_p = distance_deb * min_deb
            pp = (pre_p * pre_p) / (_F(2) * variance)
            w3 = (-_F(np.sqrt(pp * pp + _F(4.0 / 27.0) * pp * pp * pp)) - pp) / _F(2)
            w = (_F(1) if w3 > 0 else _F(-1)) * _F(np.abs(w3) ** _F(1.0 / 3.0))
            root = w - pp / _F(3) / w + _F(1)
            mu = max(root * root, mu_limit * mu_limit)
            lr = _F((_F(1) - _F(np.sqrt(mu))) ** 2) / min_deb
            new_mu_avg, _ = ma(_F(mu), mu0)
            new_lr_avg, _ = ma(_F(lr), lr0)
        outs = [new_p, new_m, new_lr_avg, new_mu_avg, new_win, new_g_avg, new_g2_avg, new_s]
        for k, (v, x) in enumerate(zip(outs, [p, m, lr_avg, mu_avg, win, g_avg, g2_avg, mem])):
            self.output(k, x.shape, _F)[...] = np.asarray(v, _F).reshape(x.shape)


should_not_do_gradient("YellowFin")
