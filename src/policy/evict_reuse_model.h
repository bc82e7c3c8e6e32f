/*
 * evict_reuse_model.h - the arithmetic of the `reuse` eviction policy, once,
 * for the ring (evict_reuse.c, whose state is atomic) and for the offline
 * replay (tools/smoe/sim/sim_policy.c, plain doubles), so that the two
 * cannot drift (docs/eviction.md, "reuse, precisely").
 *
 * The model. An expert's chance q of being asked for at the next visit of
 * its layer is a logistic regression on x = (1, ln(rate + RATE_EPS), h0 ..
 * h7): rate is its use count, decayed per visit of its layer, as a rate per
 * visit; bit i of its history h is set when it was used at the i-th visit
 * before. An idle entry's keep value is q - lambda * qv * distance, where
 * distance in [0, 1] is the part of a layer cycle left until that visit and
 * qv the moving average of the victims' q (the lowest keep value goes). The
 * weights learn online: a use after g visits of its layer turns the first
 * few of those visits into examples (missed, ..., missed, asked for).
 *
 * Everything here is a pure function of its arguments: no state, no lock,
 * no allocation, no system call (the ring calls it on its hot path).
 */
#ifndef SMOE_EVICT_REUSE_MODEL_H
#define SMOE_EVICT_REUSE_MODEL_H

#include <math.h>
#include <stdint.h>

#define SMOE__REUSE_W 10            /* weights: bias, log rate, 8 history bits */
#define SMOE__REUSE_HIST_BITS 8
#define SMOE__REUSE_RATE_EPS 0.01   /* inside the log: rare experts keep a finite logit */
#define SMOE__REUSE_WEIGHT_MAX 16.0 /* weights are clamped to +-this */
#define SMOE__REUSE_POW_N 4096      /* decay^n table; beyond it a count is 0 */
#define SMOE__REUSE_EPOCH 1024      /* examples between two snapshots of the weights */
#define SMOE__REUSE_QV_SPAN 64.0    /* victims in the moving average of their q */
#define SMOE__REUSE_PERIOD_SPAN 16.0 /* visits in the moving average of the cycle */
#define SMOE__REUSE_QV_START 0.5
/* The ring's parameters; the replay's defaults (smoe sim --decay ...). */
#define SMOE__REUSE_DECAY 0.98      /* count decay per visit of the expert's layer */
#define SMOE__REUSE_LAMBDA 1.0      /* weight of the distance, in victims' q */
#define SMOE__REUSE_RATE 0.003      /* learning rate */
#define SMOE__REUSE_TRAIN_MAX 4u    /* examples per use, at most */

/* Where the weights start: what they learned on the first halves of the
 * two gpt-oss-20b traces, rounded (docs/eviction.md, "Parameters"). */
static inline const double *smoe__reuse_w_start(void)
{
    static const double w[SMOE__REUSE_W] = {0.1,  1.2,   1.05,  0.15, 0.25,
                                            0.05, -0.08, -0.16, 0.09, -0.01};
    return w;
}

/* t[n] = decay^n for n < SMOE__REUSE_POW_N, by repeated products. */
static inline void smoe__reuse_pow_fill(double *t, double decay)
{
    t[0] = 1;
    for (int i = 1; i < SMOE__REUSE_POW_N; i++)
        t[i] = t[i - 1] * decay;
}

static inline double smoe__reuse_pow(const double *t, uint32_t n)
{
    return n < SMOE__REUSE_POW_N ? t[n] : 0.0;
}

/* Logit of reuse under weights w for history h and per-visit rate rate. */
static inline double smoe__reuse_logit(const double *w, unsigned h, double rate)
{
    double z = w[0] + w[1] * log(rate + SMOE__REUSE_RATE_EPS);
    for (int b = 0; b < SMOE__REUSE_HIST_BITS; b++)
        if (h & (1u << b))
            z += w[2 + b];
    return z;
}

/* A count f as a rate per visit: f (1 - decay), over 1 - decay^visits
 * while the layer is young (`visits` visits: a count cannot have built up). */
static inline double smoe__reuse_rate(const double *pow, double decay, double f,
                                      uint32_t visits)
{
    double rt = f * (1 - decay);
    double fill = 1.0 - smoe__reuse_pow(pow, visits);
    return visits && fill > 0 ? rt / fill : rt;
}

/* The history h as it will stand `gap` visits after the last use. */
static inline unsigned smoe__reuse_hist_at(unsigned hist, uint32_t gap)
{
    return gap >= SMOE__REUSE_HIST_BITS ? 0u : (hist << gap) & 0xffu;
}

/*
 * q of an expert with count f and history hist at its last use, `gap`
 * visits of its layer ago, for the visit after visit `at`, under weights w.
 */
static inline double smoe__reuse_q(const double *w, const double *pow, double decay, double f,
                                   unsigned hist, uint32_t gap, uint32_t at)
{
    double rt = smoe__reuse_rate(pow, decay, f * smoe__reuse_pow(pow, gap), at);
    return 1.0 / (1.0 + exp(-smoe__reuse_logit(w, smoe__reuse_hist_at(hist, gap), rt)));
}

/* The keep value: q less what the wait until its layer's visit costs. */
static inline double smoe__reuse_keep_value(double q, double lambda, double qv,
                                            double distance)
{
    return q - lambda * qv * distance;
}

/* The part of a layer cycle left until the layer's next visit, in [0, 1],
 * `since` steps after its latest visit began. */
static inline double smoe__reuse_distance(double since, double period)
{
    double d = 1.0 - since / period;
    return d < 0 ? 0 : d > 1 ? 1 : d;
}

/* One logistic-regression step of w: history h and rate rate were (y 1) or
 * were not (y 0) asked for at a visit. */
static inline void smoe__reuse_learn(double *w, unsigned h, double rate, int y, double lr)
{
    double e = lr * ((double)y - 1.0 / (1.0 + exp(-smoe__reuse_logit(w, h, rate))));
    double x[SMOE__REUSE_W];
    x[0] = 1;
    x[1] = log(rate + SMOE__REUSE_RATE_EPS);
    for (int b = 0; b < SMOE__REUSE_HIST_BITS; b++)
        x[2 + b] = (h & (1u << b)) ? 1 : 0;
    for (int i = 0; i < SMOE__REUSE_W; i++) {
        double v = w[i] + e * x[i];
        w[i] = v > SMOE__REUSE_WEIGHT_MAX ? SMOE__REUSE_WEIGHT_MAX
               : v < -SMOE__REUSE_WEIGHT_MAX ? -SMOE__REUSE_WEIGHT_MAX : v;
    }
}

/* The examples a use teaches: the expert (count f, history hist) was last
 * used at visit `last` of its layer and is asked for again `gap` visits
 * later. Visit last + j, for j = 1 .. min(gap, train_max), as it stood
 * before (j - 1 visits sat out), goes to learn(u, h, rate, asked). */
typedef void (*smoe__reuse_learn_fn)(void *u, unsigned h, double rate, int asked);

static inline void smoe__reuse_examples(const double *pow, double decay, double f,
                                        unsigned hist, uint32_t last, uint32_t gap,
                                        uint32_t train_max, smoe__reuse_learn_fn learn, void *u)
{
    for (uint32_t j = 1; j <= gap && j <= train_max; j++) {
        learn(u, hist, smoe__reuse_rate(pow, decay, f, last + j - 1), j == gap);
        hist = (hist << 1) & 0xffu;
        f *= decay;
    }
}

/* The record after a use `gap` visits after the last: count and history. */
static inline double smoe__reuse_count_after(const double *pow, double f, uint32_t gap)
{
    return f * smoe__reuse_pow(pow, gap) + 1.0;
}

static inline unsigned smoe__reuse_hist_after(unsigned hist, uint32_t gap)
{
    return smoe__reuse_hist_at(hist, gap) | 1u;
}

/* Moving averages: of the victims' q, and of the steps between two visits
 * of one layer. */
static inline double smoe__reuse_qv_next(double qv, double q)
{
    return qv + (q - qv) / SMOE__REUSE_QV_SPAN;
}

static inline double smoe__reuse_period_next(double period, double gap)
{
    return period + (gap - period) / SMOE__REUSE_PERIOD_SPAN;
}

#endif
