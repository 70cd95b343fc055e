/* Fused optimizer steps for the CPU: one call updates every parameter of an SGD, Momentum, Adam or
   AdamWeightDecay step.

   The NumPy code of an fp16 parameter's step makes several passes over memory: unscale the fp16
   gradient into a new fp32 array, add weight decay, run the rule (each `*=` / `-=` a pass of its
   own, plus temporaries such as `lr * grad`), then round the fp32 master back into the fp16
   parameter. Here each parameter is walked once, a block at a time, and every block goes through
   all of those steps while it sits in L1. fused_step in minigrad/optim/slots.py builds the row
   table and falls back to NumPy for everything this file does not cover.

   The results are bit for bit those of the NumPy code (tests/optim/test_slots.py): every
   operation is one fp32 IEEE operation in the same order, with the same fp32 constants (a Python
   float such as 1 - beta1 is computed in double and rounded to fp32 once, as NumPy does with a
   Python scalar), and the library is compiled with -ffp-contract=off so that no `a * b + c`
   becomes an FMA. fp16 <-> fp32 conversions are NumPy's (convert_host.cpp), NaN payloads included.
   Not defined (here or in NumPy, whose loops differ by array length and position): which NaN an
   addition of two NaNs returns; the result is a NaN either way.

   Per element, with g the gradient as given (fp16 or fp32) and w the fp32 weight:
       g = fp32(g);  g = g * inv_scale (if != 1);  g = g * inv_loss_scale (if != 1)
       g = g + wd * w                         (if wd != 0, except AdamWeightDecay: decoupled)
     SGD (momentum m, dampening d, nesterov):
       a = g on the first step (MG_STATE_FROM_GRAD), else a = a * m + (d == 0 ? g : (1 - d) * g)
       w = w - lr * (nesterov ? g + m * a : a)       (m > 0);     w = w - lr * g  (m == 0)
     Momentum (MindSpore ApplyMomentum):
       v = v * m + g;   w = w - lr * v;   nesterov: w = (w - lr * g) - (lr * m) * v
     Adam (lr is the row's bias-corrected lr_t):
       m = m * b1 + (1 - b1) * g;   v = v * b2 + (1 - b2) * (g * g)
       w = w - lr * (nesterov ? b1 * m + (1 - b1) * g : m) / (sqrt(v) + eps)
     AdamWeightDecay:
       w = w * (1 - lr * wd) (if wd != 0);  m, v as Adam;  w = w - lr * (m / (sqrt(v) + eps))
   then half = fp16(w) when the parameter is fp16. */
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>

typedef std::int64_t i64;
typedef std::uint16_t u16;

extern "C" void mg_half_to_float(const u16* src, float* dst, i64 n);
extern "C" i64 mg_float_to_half(const float* src, u16* dst, i64 n);

/* One parameter. Mirrors ROW in minigrad/optim/slots.py. */
struct MgUpdateRow {
    float* weight;     /* fp32: the parameter itself, or the master of an fp16 parameter */
    const void* grad;  /* dense fp16 (MG_GRAD_HALF) or fp32, never written */
    u16* half;         /* the fp16 parameter, written from the new weight; null for fp32 */
    float* state;      /* SGD's / Momentum's buffer, Adam's first moment; else null */
    float* state2;     /* Adam's second moment; else null */
    i64 n;
    i64 flags;
    double lr;
    double weight_decay;
};

enum { MG_GRAD_HALF = 1, MG_STATE_FROM_GRAD = 2 };
enum { MG_RULE_SGD = 0, MG_RULE_MOMENTUM = 1, MG_RULE_ADAM = 2, MG_RULE_ADAM_WEIGHT_DECAY = 3 };

/* The rule's hyper-parameters, as the Python floats the optimizer holds. Mirrors
   Rule.hyper_address in minigrad/optim/slots.py. */
struct MgHyper {
    double momentum;   /* SGD, Momentum */
    double dampening;  /* SGD */
    double beta1, beta2, eps;  /* Adam, AdamWeightDecay */
    double nesterov;   /* SGD, Momentum, Adam: 0 or 1 */
};

/* Elements per block: the gradient buffer and a block of weight and state stay in L1. */
static const i64 BLOCK = 1024;

/* The gradient the rule sees (the first lines of the formulas above), in buf. */
static const float* prepare_gradient(const MgUpdateRow& row, i64 start, i64 m, float inv_scale,
                                     float inv_loss_scale, bool coupled_decay, float* buf)
{
    const float* g;
    if (row.flags & MG_GRAD_HALF) {
        mg_half_to_float(static_cast<const u16*>(row.grad) + start, buf, m);
        g = buf;
    } else {
        g = static_cast<const float*>(row.grad) + start;
    }
    /* each multiplication is its own pass, as in NumPy: the second rounds the first's result */
    if (inv_scale != 1.0f) {
        for (i64 j = 0; j < m; ++j)
            buf[j] = g[j] * inv_scale;
        g = buf;
    }
    if (inv_loss_scale != 1.0f) {
        for (i64 j = 0; j < m; ++j)
            buf[j] = g[j] * inv_loss_scale;
        g = buf;
    }
    if (coupled_decay && row.weight_decay != 0.0) {
        const float wd = (float)row.weight_decay;
        const float* w = row.weight + start;
        for (i64 j = 0; j < m; ++j)
            buf[j] = g[j] + wd * w[j];
        g = buf;
    }
    return g;
}

static void sgd_block(const MgUpdateRow& row, i64 start, i64 m, const float* g, const MgHyper& h)
{
    float* w = row.weight + start;
    const float lr = (float)row.lr, momentum = (float)h.momentum;
    if (!(h.momentum > 0.0)) {  /* NumPy's test is on the Python float */
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * g[j];
        return;
    }
    float* a = row.state + start;
    if (row.flags & MG_STATE_FROM_GRAD) {
        std::copy(g, g + m, a);
    } else if (h.dampening != 0.0) {
        const float keep = (float)(1.0 - h.dampening);
        for (i64 j = 0; j < m; ++j)
            a[j] = a[j] * momentum + keep * g[j];
    } else {
        for (i64 j = 0; j < m; ++j)
            a[j] = a[j] * momentum + g[j];
    }
    if (h.nesterov != 0.0)
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * (g[j] + momentum * a[j]);
    else
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * a[j];
}

static void momentum_block(const MgUpdateRow& row, i64 start, i64 m, const float* g, const MgHyper& h)
{
    float* w = row.weight + start;
    float* v = row.state + start;
    const float momentum = (float)h.momentum, lr = (float)row.lr;
    for (i64 j = 0; j < m; ++j)
        v[j] = v[j] * momentum + g[j];
    if (h.nesterov != 0.0) {
        const float lr_momentum = (float)(row.lr * h.momentum);  /* NumPy: (lr * momentum) in double */
        for (i64 j = 0; j < m; ++j) {
            const float stepped = w[j] - lr * g[j];
            w[j] = stepped - lr_momentum * v[j];
        }
    } else {
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * v[j];
    }
}

/* Adam and AdamWeightDecay: the moments, then the step (the two differ only there). */
static void adam_block(const MgUpdateRow& row, i64 start, i64 m, const float* g, const MgHyper& h,
                       bool decoupled)
{
    float* w = row.weight + start;
    float* m1 = row.state + start;
    float* m2 = row.state2 + start;
    const float b1 = (float)h.beta1, b2 = (float)h.beta2, eps = (float)h.eps, lr = (float)row.lr;
    const float one_minus_b1 = (float)(1.0 - h.beta1), one_minus_b2 = (float)(1.0 - h.beta2);
    if (decoupled && row.weight_decay != 0.0) {
        const float shrink = (float)(1.0 - row.lr * row.weight_decay);
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] * shrink;
    }
    for (i64 j = 0; j < m; ++j) {
        m1[j] = m1[j] * b1 + one_minus_b1 * g[j];
        m2[j] = m2[j] * b2 + one_minus_b2 * (g[j] * g[j]);
    }
    if (decoupled) {
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * (m1[j] / (std::sqrt(m2[j]) + eps));
    } else if (h.nesterov != 0.0) {
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * (b1 * m1[j] + one_minus_b1 * g[j]) / (std::sqrt(m2[j]) + eps);
    } else {
        for (i64 j = 0; j < m; ++j)
            w[j] = w[j] - lr * m1[j] / (std::sqrt(m2[j]) + eps);
    }
}

/* Apply `rule` (MG_RULE_*) with hyper-parameters `hyper` to every row. Returns how many finite
   weights became +-inf in their fp16 parameter (the caller lets NumPy warn about them), and sets
   *raised to the IEEE exceptions the arithmetic raised, as NumPy's ufuncs would see them:
   1 divide by zero, 2 overflow, 4 invalid (the caller warns as NumPy does). */
extern "C" i64 mg_fused_update(const MgUpdateRow* rows, i64 n_rows, int rule, float inv_scale,
                               float inv_loss_scale, const MgHyper* hyper, int* raised)
{
    std::feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID);
    const bool decoupled = rule == MG_RULE_ADAM_WEIGHT_DECAY;
    float buf[BLOCK];
    i64 overflows = 0;
    for (i64 r = 0; r < n_rows; ++r) {
        const MgUpdateRow& row = rows[r];
        for (i64 start = 0; start < row.n; start += BLOCK) {
            const i64 m = std::min(BLOCK, row.n - start);
            const float* g = prepare_gradient(row, start, m, inv_scale, inv_loss_scale, !decoupled, buf);
            if (rule == MG_RULE_SGD)
                sgd_block(row, start, m, g, *hyper);
            else if (rule == MG_RULE_MOMENTUM)
                momentum_block(row, start, m, g, *hyper);
            else
                adam_block(row, start, m, g, *hyper, decoupled);
            if (row.half)
                overflows += mg_float_to_half(row.weight + start, row.half + start, m);
        }
    }
    *raised = (std::fetestexcept(FE_DIVBYZERO) ? 1 : 0) | (std::fetestexcept(FE_OVERFLOW) ? 2 : 0)
              | (std::fetestexcept(FE_INVALID) ? 4 : 0);
    return overflows;
}
