// Synthetic explicit ratings for the benchmarks of explicit-ratings algorithms (bench_als,
// bench_sgd), their shape given as parameters (struct ratings_shape) so that a result can
// be checked on more than one generator:
//
// - sizes: users x items and a target number of ratings, times a scale (users and ratings
//   x scale, items x min(1, 4 scale), so small scales stay dense enough to learn from);
// - popularity, separately for users (how many items each rates) and items (how often each
//   is drawn): log-normal with sigma, or Zipf (the r-th most popular, ranks a seeded
//   permutation, weighs r^-s);
// - caps: a user rates at most user_cap x items items, an item is rated by at most
//   item_cap x users users (0: no cap). The user cap clips the degrees, and the degrees are
//   then rescaled to meet the target again; the item cap is enforced exactly: holders over
//   the cap are dropped (a seeded hash of user and item picks which) and the users who lost
//   an item draw a replacement among the items not yet full, until no item is over;
// - the values: round(mean + b_u + b_i + u . v + noise) clipped to lo..hi ("stars"), or
//   the same unrounded and unclipped ("continuous"), with b_u, b_i, u and v normal, u and v
//   of the planted rank;
// - a held-out fraction (the test set) and a seed.
//
// Every user rates at least one item and every item is rated at least once. Presets name
// whole shapes (ratings_preset); `--case NAME[,key=value,...]` picks one and changes
// parameters (ratings_parse_case; the keys are those that ratings_shape_line prints).
// The "netflix" preset is the generator the benches used before the shapes were
// parameters, bit for bit from --scale 0.1 to 1 (checked at 0.1, 0.25, 0.5 and 1); at
// smaller scales, where its cap of half the (fewer) items clips more than 0.5% of the
// target, its degrees are now rescaled to meet the target. Host code, built with OpenMP;
// every random number is a hash of the seed and what it is for, so the output does not
// depend on the thread count.
#ifndef MFACT_BENCH_SYNTHETIC_RATINGS_H
#define MFACT_BENCH_SYNTHETIC_RATINGS_H

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"

// ---- the shape -----------------------------------------------------------------------------

enum ratings_law { RATINGS_LOGNORMAL, RATINGS_ZIPF };

struct ratings_shape {
    std::string label;            // what the tables print: the --case spec, or the train file
    std::string preset;           // the preset it started from
    double users, items, ratings; // at scale 1 (ratings: the target count)
    double scale;                 // users and ratings x scale, items x min(1, 4 scale)
    ratings_law user_law, item_law;
    double user_skew, item_skew; // log-normal sigma, or Zipf exponent
    double user_cap, item_cap;   // fractions of items (users' cap) and of users (items'); 0: none
    int rank;                    // planted rank
    double factor_sd;            // the planted factors' entries: N(0, factor_sd^2)
    double noise;                // N(0, noise^2) added to every rating
    double mean, user_bias, item_bias; // global mean; the biases' standard deviations
    bool stars;                        // round and clip to lo..hi, else continuous
    double lo, hi;
    double heldout; // fraction held out as the test set
    uint64_t seed;
};

static inline int32_t shape_users(const ratings_shape &s)
{
    return (int32_t)(s.users * s.scale);
}
static inline int32_t shape_items(const ratings_shape &s)
{
    return (int32_t)(s.items * std::min(1.0, 4 * s.scale));
}
static inline double shape_target(const ratings_shape &s)
{
    return s.ratings * s.scale;
}

static const char *const ratings_preset_names[] = {"netflix", "lognormal-cap45", "zipf",
                                                   "dense-users"};
// Implicit-feedback shapes (bench_ials; not in the explicit benches' default list).
static const char *const ratings_implicit_names[] = {"lastfm", "implicit-1m"};

// The preset called `name` into *s (false: no such preset).
static bool ratings_preset(const char *name, ratings_shape *s)
{
    // netflix: the benches' original data. 480,189 x 17,770 like Netflix, users log-normal
    // (sigma 1) capped at half the items, items log-normal (sigma 1.5) uncapped, rank 10.
    *s = ratings_shape();
    s->label = s->preset = name;
    s->users = 480189, s->items = 17770, s->ratings = 99e6, s->scale = 1.0;
    s->user_law = s->item_law = RATINGS_LOGNORMAL;
    s->user_skew = 1.0, s->item_skew = 1.5;
    s->user_cap = 0.5, s->item_cap = 0.0;
    s->rank = 10, s->factor_sd = 0.4, s->noise = 0.74;
    s->mean = 3.6, s->user_bias = 0.3, s->item_bias = 0.4;
    s->stars = true, s->lo = 1.0, s->hi = 5.0;
    s->heldout = 0.01, s->seed = 1;
    if (!strcmp(name, "netflix"))
        return true;
    if (!strcmp(name, "lognormal-cap45")) {
        // The shape of the real Netflix data that cuMF's papers measured on: 100.48M
        // ratings, items log-normal with a long head (sigma 2.2: Netflix's mean item has
        // 5,654 ratings, its median 561) capped at 45% of the users (Netflix's most rated
        // title: 48.5%), users a little more skewed than the netflix preset (mean 209,
        // median 96: sigma 1.25). The same planted model as netflix.
        s->ratings = 100.48e6;
        s->user_skew = 1.25, s->item_skew = 2.2, s->item_cap = 0.45;
        return true;
    }
    if (!strcmp(name, "zipf")) {
        // Power laws on both sides and a long catalogue, like e-commerce and music data:
        // 480,189 users x 100,000 items, 60M ratings, items Zipf(2) capped at 20% of the
        // users (a few hundred items at the cap, then a heavy tail of rarely rated ones),
        // users Zipf(1) capped at 10% of the items; a planted rank of 32 (factors of sd
        // 0.3: the planted dot products vary as much as netflix's), and more noise.
        s->items = 100000, s->ratings = 60e6;
        s->user_law = s->item_law = RATINGS_ZIPF;
        s->user_skew = 1.0, s->item_skew = 2.0;
        s->user_cap = 0.1, s->item_cap = 0.2;
        s->rank = 32, s->factor_sd = 0.3, s->noise = 0.9;
        return true;
    }
    if (!strcmp(name, "dense-users")) {
        // Few users with many ratings each (Yahoo! Music's 262 ratings per user and more):
        // 50,000 users x 17,770 items, 50M ratings (1,000 per user, 5.6% dense), users
        // log-normal (sigma 0.7) capped at 60% of the items, items log-normal (sigma 1)
        // uncapped (the most rated reaches about 80% of the users); rank 20, noise 0.5,
        // continuous values (neither rounded nor clipped).
        s->users = 50000, s->ratings = 50e6;
        s->user_skew = 0.7, s->item_skew = 1.0;
        s->user_cap = 0.6;
        s->rank = 20, s->noise = 0.5, s->factor_sd = 0.3;
        s->stars = false;
        return true;
    }
    if (!strcmp(name, "lastfm")) {
        // lastfm-360k's shape (implicit's benchmark): 358,868 users x 292,385 artists, 17.5M
        // (user, artist) pairs. The data set keeps each user's top 50 artists, so users
        // vary little (log-normal, sigma 0.3, capped at 100 artists); artists follow a
        // power law (Zipf(1.1) capped at 20% of the users: a few very popular, a long tail
        // of artists with one listener). Values 1..5 play as counts.
        s->users = 358868, s->items = 292385, s->ratings = 17.5e6;
        s->user_law = RATINGS_LOGNORMAL, s->item_law = RATINGS_ZIPF;
        s->user_skew = 0.3, s->item_skew = 1.1;
        s->user_cap = 100.0 / 292385.0, s->item_cap = 0.2;
        s->rank = 32, s->factor_sd = 0.3, s->noise = 0.9;
        s->heldout = 0.2;
        return true;
    }
    if (!strcmp(name, "implicit-1m")) {
        // The large implicit case: 1,000,000 users x 100,000 items, 100M
        // interactions, users log-normal (sigma 1) capped at 5% of the items, items
        // Zipf(1) capped at 30% of the users.
        s->users = 1e6, s->items = 100000, s->ratings = 100e6;
        s->user_law = RATINGS_LOGNORMAL, s->item_law = RATINGS_ZIPF;
        s->user_skew = 1.0, s->item_skew = 1.0;
        s->user_cap = 0.05, s->item_cap = 0.3;
        s->rank = 32, s->factor_sd = 0.3, s->noise = 0.9;
        s->heldout = 0.2;
        return true;
    }
    return false;
}

// "100.48M", "17770", "2e6": a count with an optional k, M or G suffix.
static bool parse_count(const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v)
        return false;
    if (*end == 'k' || *end == 'K')
        x *= 1e3, end++;
    else if (*end == 'm' || *end == 'M')
        x *= 1e6, end++;
    else if (*end == 'g' || *end == 'G')
        x *= 1e9, end++;
    *out = x;
    return *end == '\0';
}

static bool parse_number(const char *v, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return end != v && *end == '\0' && isfinite(*out);
}

// One --case spec, NAME[,key=value,...], into *s. `scale` and `seed` (the bench's --scale
// and --seed) apply unless the spec sets its own. False, with *err set, on a bad spec.
static bool ratings_parse_case(const char *spec, double scale, uint64_t seed, ratings_shape *s,
                               std::string *err)
{
    std::vector<std::string> parts;
    for (const char *p = spec;;) {
        const char *q = strchr(p, ',');
        parts.push_back(q ? std::string(p, q) : std::string(p));
        if (!q)
            break;
        p = q + 1;
    }
    if (!ratings_preset(parts[0].c_str(), s)) {
        *err = "unknown preset '" + parts[0] + "' (presets:";
        for (const char *n : ratings_preset_names)
            *err += std::string(" ") + n;
        for (const char *n : ratings_implicit_names) // bench_ials' shapes are presets too
            *err += std::string(" ") + n;
        *err += ")";
        return false;
    }
    s->label = spec;
    s->scale = scale, s->seed = seed;
    // The numeric keys: where each goes and its range.
    struct numeric {
        const char *key;
        double *to;
        double min, max;
    };
    double rank = s->rank;
    const numeric keys[] = {
        {"scale", &s->scale, 1e-9, 1e9},
        {"user-sigma", &s->user_skew, 0, 100},
        {"user-zipf", &s->user_skew, 0, 100},
        {"item-sigma", &s->item_skew, 0, 100},
        {"item-zipf", &s->item_skew, 0, 100},
        {"user-cap", &s->user_cap, 0, 1},
        {"item-cap", &s->item_cap, 0, 1},
        {"rank", &rank, 0, 4096},
        {"factor-sd", &s->factor_sd, 0, 1e9},
        {"noise", &s->noise, 0, 1e9},
        {"mean", &s->mean, -1e9, 1e9},
        {"user-bias", &s->user_bias, 0, 1e9},
        {"item-bias", &s->item_bias, 0, 1e9},
        {"lo", &s->lo, -1e9, 1e9},
        {"hi", &s->hi, -1e9, 1e9},
        {"heldout", &s->heldout, 0, 0.999999},
    };
    for (size_t k = 1; k < parts.size(); k++) {
        const std::string &kv = parts[k];
        size_t eq = kv.find('=');
        const std::string key = kv.substr(0, eq);
        const char *v = kv.c_str() + (eq == std::string::npos ? kv.size() : eq + 1);
        bool ok = eq != std::string::npos, known = true;
        double x = 0.0;
        if (key == "values") {
            s->stars = !strcmp(v, "stars");
            ok = ok && (s->stars || !strcmp(v, "continuous"));
        } else if (key == "users" || key == "items" || key == "ratings") {
            ok = ok && parse_count(v, &x) && x >= 1 && x <= (key == "ratings" ? 1e12 : 2e9);
            (key == "users" ? s->users : key == "items" ? s->items : s->ratings) = x;
        } else if (key == "seed") {
            char *end;
            s->seed = strtoull(v, &end, 10);
            ok = ok && end != v && *end == '\0';
        } else {
            const numeric *n = NULL;
            for (const numeric &c : keys)
                if (key == c.key)
                    n = &c;
            known = n != NULL;
            if (n) {
                ok = ok && parse_number(v, &x) && x >= n->min && x <= n->max;
                *n->to = x;
            }
        }
        if (!known) {
            *err = "unknown key '" + key +
                   "' (keys: users items ratings scale user-sigma user-zipf item-sigma item-zipf "
                   "user-cap item-cap rank factor-sd noise mean user-bias item-bias values lo "
                   "hi heldout seed)";
            return false;
        }
        if (!ok) {
            *err = "bad value in '" + kv + "'";
            return false;
        }
        if (key == "user-sigma" || key == "user-zipf")
            s->user_law = key == "user-zipf" ? RATINGS_ZIPF : RATINGS_LOGNORMAL;
        if (key == "item-sigma" || key == "item-zipf")
            s->item_law = key == "item-zipf" ? RATINGS_ZIPF : RATINGS_LOGNORMAL;
        if (key == "rank" && rank != floor(rank)) {
            *err = "rank must be a whole number";
            return false;
        }
        s->rank = (int)rank;
    }
    if (s->lo >= s->hi) {
        *err = "lo must be below hi";
        return false;
    }
    if (shape_users(*s) < 1 || shape_items(*s) < 1) {
        *err = "no users or no items at this scale";
        return false;
    }
    if (s->item_cap > 0 &&
        std::max(1.0, floor(s->item_cap * shape_users(*s))) * shape_items(*s) < shape_target(*s)) {
        *err = "item-cap leaves room for fewer ratings than the target";
        return false;
    }
    return true;
}

// The shape as one line in the --case syntax, at its scale (sizes after scaling).
static std::string ratings_shape_line(const ratings_shape &s)
{
    char b[640];
    const char *law[] = {"sigma", "zipf"};
    snprintf(b, sizeof b,
             "%s,users=%d,items=%d,ratings=%.0f,user-%s=%g,user-cap=%g,item-%s=%g,item-cap=%g,"
             "rank=%d,factor-sd=%g,noise=%g,mean=%g,user-bias=%g,item-bias=%g,values=%s,lo=%g,"
             "hi=%g,heldout=%g,seed=%llu",
             s.preset.c_str(), shape_users(s), shape_items(s), shape_target(s), law[s.user_law],
             s.user_skew, s.user_cap, law[s.item_law], s.item_skew, s.item_cap, s.rank, s.factor_sd,
             s.noise, s.mean, s.user_bias, s.item_bias, s.stars ? "stars" : "continuous", s.lo,
             s.hi, s.heldout, (unsigned long long)s.seed);
    return b;
}

// The cases a bench runs: one per --case spec, or every preset when there is none; the
// files' single case when both files are given (a --case is then an error). Exits with
// status 2 and a message on a bad spec.
static std::vector<ratings_shape> ratings_cases(const char *bench,
                                                const std::vector<std::string> &specs, double scale,
                                                uint64_t seed, const char *train_file,
                                                const char *test_file)
{
    std::vector<ratings_shape> cases;
    if (train_file && test_file) {
        if (!specs.empty()) {
            fprintf(stderr, "%s: --case and --train/--test exclude each other\n", bench);
            exit(2);
        }
        ratings_shape s;
        ratings_preset("netflix", &s);
        const char *slash = strrchr(train_file, '/');
        s.label = s.preset = slash ? slash + 1 : train_file;
        cases.push_back(s);
        return cases;
    }
    std::vector<std::string> all(specs);
    if (all.empty())
        all.assign(std::begin(ratings_preset_names), std::end(ratings_preset_names));
    for (const std::string &spec : all) {
        ratings_shape s;
        std::string err;
        if (!ratings_parse_case(spec.c_str(), scale, seed, &s, &err)) {
            fprintf(stderr, "%s: --case %s: %s\n", bench, spec.c_str(), err.c_str());
            exit(2);
        }
        cases.push_back(s);
    }
    return cases;
}

// ---- the generator -------------------------------------------------------------------------

static double unit(uint64_t h)
{
    return (double)(h >> 11) * 0x1.0p-53;
}
// A standard normal from two hashed uniforms (Box-Muller).
static double normal(uint64_t key)
{
    double u1 = unit(mix(key)) + 1e-300, u2 = unit(mix(key ^ 0x5851f42d4c957f2dull));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// The key of entry t of row x of a planted factor: the original layout (16 per row) for
// t < 16, a separate stream past it.
static uint64_t factor_key(uint64_t base, uint64_t x, int t)
{
    return t < 16 ? base + x * 16 + t : mix(base ^ 0x3c6ef372fe94f82bull ^ (x << 16) ^ (uint64_t)t);
}

// The key of rating (u, i): noise and held-out draw. The original layout while items fit
// in 20 bits.
static uint64_t rating_key(uint64_t seed, int32_t u, int32_t i, int32_t items)
{
    if (items <= (1 << 20))
        return mix(seed ^ mix(((uint64_t)u << 20) ^ (uint64_t)i ^ 0x9000000000000ull));
    return mix(seed ^ mix((((uint64_t)u << 32) | (uint32_t)i) ^ 0x9100000000000000ull));
}

// What the generator made, counted after the fact.
struct ratings_stats {
    double target;      // the ratings asked for
    int64_t nnz;        // the ratings made (training and test)
    int64_t max_item;   // ratings of the most rated item
    int32_t max_user;   // ratings of the most active user
    double rare_items;  // fraction of the items with fewer than 5 ratings
    double mean_rating; // over all ratings
    double oracle_rmse; // the planted model's RMSE on the held-out part
    int64_t item_cap;   // the item cap in users (0: none)
    int cap_rounds;     // rounds of dropping and redrawing the cap took
};

struct ratings {
    int32_t users, items;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    std::vector<float> val;
    std::vector<uint8_t> test; // per entry: held out
    double oracle_rmse;        // the planted model's RMSE on the held-out part
    ratings_stats stats;
};

// Vose alias table over weights w (zero weights are never drawn).
struct alias {
    std::vector<double> prob;
    std::vector<int32_t> other;
    explicit alias(const std::vector<double> &w)
    {
        size_t n = w.size();
        double sum = 0.0;
        for (double x : w)
            sum += x;
        prob.resize(n), other.resize(n);
        std::vector<double> p(n);
        std::vector<int32_t> small, large;
        for (size_t i = 0; i < n; i++) {
            p[i] = w[i] * n / sum;
            (p[i] < 1.0 ? small : large).push_back((int32_t)i);
        }
        while (!small.empty() && !large.empty()) {
            int32_t s = small.back(), l = large.back();
            small.pop_back();
            prob[s] = p[s], other[s] = l;
            p[l] -= 1.0 - p[s];
            if (p[l] < 1.0) {
                large.pop_back();
                small.push_back(l);
            }
        }
        // Left by rounding: an entry with weight keeps its own item, one without weight
        // sends its draws to the heaviest item.
        int32_t top = (int32_t)(std::max_element(w.begin(), w.end()) - w.begin());
        for (int32_t i : small)
            prob[i] = w[i] > 0 ? 1.0 : 0.0, other[i] = w[i] > 0 ? i : top;
        for (int32_t i : large)
            prob[i] = 1.0, other[i] = i;
    }
    int32_t draw(uint64_t h) const
    {
        size_t n = prob.size();
        size_t i = (size_t)((h >> 32) * n >> 32);
        return unit(mix(h)) < prob[i] ? (int32_t)i : other[i];
    }
};

// Ranks 1..n in a seeded random order (the Zipf laws' popularity ranks).
static std::vector<int32_t> seeded_ranks(int32_t n, uint64_t key)
{
    std::vector<std::pair<uint64_t, int32_t>> k(n);
    for (int32_t x = 0; x < n; x++)
        k[x] = {mix(key ^ mix((uint64_t)x)), x};
    std::sort(k.begin(), k.end());
    std::vector<int32_t> rank(n);
    for (int32_t r = 0; r < n; r++)
        rank[k[r].second] = r + 1;
    return rank;
}

// The degrees at multiplier c: round(c raw[u]), at least 1, at most cap. Returns their sum.
static int64_t degrees_at(const std::vector<double> &raw, double c, int32_t cap,
                          std::vector<int32_t> *deg)
{
    int64_t sum = 0;
    const int32_t n = (int32_t)raw.size();
#pragma omp parallel for reduction(+ : sum)
    for (int32_t u = 0; u < n; u++) {
        int32_t d = (int32_t)std::min<double>(std::max(1.0, round(c * raw[u])), cap);
        if (deg)
            (*deg)[u] = d;
        sum += d;
    }
    return sum;
}

// Draws of distinct items, weighted: an alias table for the common case (draw, and draw
// again when the user already holds the item), and for a user whose draws keep hitting
// items already held (a large share of the weight taken), successive sampling from a
// Fenwick tree over integer weights with the user's items taken out. Both draw the next
// item in proportion to its weight among the items the user does not hold, so switching
// from one to the other changes no probability.
struct item_sampler {
    alias table;
    int32_t n;
    std::vector<uint64_t> q;    // the weights in units of 2^-62 of their sum (1 at least)
    std::vector<uint64_t> tree; // Fenwick tree over q, 1-based
    uint64_t total;
    explicit item_sampler(const std::vector<double> &w)
        : table(w), n((int32_t)w.size()), q(w.size()), tree(w.size() + 1, 0), total(0)
    {
        double sum = 0.0;
        for (double x : w)
            sum += x;
        for (int32_t i = 0; i < n; i++) {
            q[i] = w[i] > 0 ? std::max<uint64_t>(1, (uint64_t)(w[i] / sum * 0x1.0p62)) : 0;
            total += q[i];
            tree[i + 1] += q[i];
            int32_t j = (i + 1) + ((i + 1) & -(i + 1));
            if (j <= n)
                tree[j] += tree[i + 1];
        }
    }
};

static void fenwick_add(std::vector<uint64_t> &t, int32_t i, uint64_t delta)
{
    for (size_t x = (size_t)i + 1; x < t.size(); x += x & (~x + 1))
        t[x] += delta; // unsigned: adding -q takes q out exactly
}

// The item whose weight interval holds r (r < the tree's total).
static int32_t fenwick_find(const std::vector<uint64_t> &t, uint64_t r)
{
    size_t pos = 0, step = 1;
    while (step * 2 < t.size())
        step *= 2;
    for (; step; step /= 2)
        if (pos + step < t.size() && t[pos + step] <= r) {
            pos += step;
            r -= t[pos];
        }
    return (int32_t)pos;
}

// Draws distinct items for one user into out[n..want), skipping those set in `seen` (the
// user's items so far, kept up to date), with hashes from h on. After 8 draws per item
// wanted (plus 64) the rest comes from the Fenwick tree; `tree` is the thread's copy of
// it, made on first use and left as found. Returns the count reached: `want`, unless the
// items with weight run out.
static int32_t draw_items(const item_sampler &sm, uint64_t h, int32_t *out, int32_t n, int32_t want,
                          std::vector<uint64_t> &seen, std::vector<uint64_t> &tree)
{
    if (sm.total == 0)
        return n; // nothing left to draw (every item full)
    const int64_t limit = 8ll * (want - n) + 64;
    for (int64_t tries = 0; n < want && tries < limit; tries++) {
        h = mix(h);
        int32_t i = sm.table.draw(h);
        if (seen[i >> 6] >> (i & 63) & 1)
            continue;
        seen[i >> 6] |= 1ull << (i & 63);
        out[n++] = i;
    }
    if (n == want)
        return n;
    if (tree.empty())
        tree = sm.tree;
    uint64_t total = sm.total;
    for (int32_t p = 0; p < n; p++) {
        fenwick_add(tree, out[p], ~sm.q[out[p]] + 1);
        total -= sm.q[out[p]];
    }
    while (n < want && total > 0) {
        h = mix(h);
        uint64_t r = std::min(total - 1, (uint64_t)(unit(h) * (double)total));
        int32_t i = fenwick_find(tree, r);
        seen[i >> 6] |= 1ull << (i & 63);
        out[n++] = i;
        fenwick_add(tree, i, ~sm.q[i] + 1);
        total -= sm.q[i];
    }
    for (int32_t p = 0; p < n; p++)
        fenwick_add(tree, out[p], sm.q[out[p]]);
    return n;
}

// How many users hold each item (per-thread counts, summed).
static std::vector<int64_t> item_counts(int32_t users, int32_t items, const int64_t *start,
                                        const int32_t *got, const int32_t *items_of)
{
    const int nt = omp_get_max_threads();
    std::vector<int32_t> part((size_t)nt * items, 0);
    std::vector<int64_t> count(items, 0);
#pragma omp parallel num_threads(nt)
    {
        int32_t *mine = part.data() + (size_t)omp_get_thread_num() * items;
#pragma omp for schedule(static)
        for (int32_t u = 0; u < users; u++)
            for (int32_t p = 0; p < got[u]; p++)
                mine[items_of[start[u] + p]]++;
#pragma omp for schedule(static)
        for (int32_t i = 0; i < items; i++)
            for (int t = 0; t < nt; t++)
                count[i] += part[(size_t)t * items + i];
    }
    return count;
}

// The hash that ranks an over-cap item's holders: the lowest `cap` keep it.
static uint64_t keep_key(uint64_t seed, int32_t u, int32_t i)
{
    return mix(seed ^ mix((((uint64_t)u << 32) | (uint32_t)i) ^ 0xc3a5c85c97cb3127ull));
}

// Enforces the item cap on the drawn lists: rounds of dropping each over-cap item from all
// but `cap` of its holders, then redrawing what the users lost among the items below the
// cap, until no item is over (the last round drops without redrawing). Returns the rounds.
static int enforce_item_cap(uint64_t seed, int32_t users, int32_t items, int64_t cap,
                            const std::vector<double> &w, const std::vector<int64_t> &start,
                            const std::vector<int32_t> &deg, std::vector<int32_t> &got,
                            std::vector<int32_t> &items_of)
{
    const int max_rounds = 16;
    for (int round = 1;; round++) {
        std::vector<int64_t> count =
            item_counts(users, items, start.data(), got.data(), items_of.data());
        std::vector<int32_t> slot(items, -1), over;
        for (int32_t i = 0; i < items; i++)
            if (count[i] > cap) {
                slot[i] = (int32_t)over.size();
                over.push_back(i);
            }
        if (over.empty())
            return round - 1;
        // Each over-cap item's holders' keys (placed by thread in a static schedule, so the
        // same everywhere), then the cap-th smallest.
        const int nt = omp_get_max_threads();
        const size_t m = over.size();
        std::vector<std::vector<uint64_t>> keys(m);
        for (size_t k = 0; k < m; k++)
            keys[k].resize(count[over[k]]);
        std::vector<int64_t> at((size_t)nt * m, 0);
#pragma omp parallel num_threads(nt)
        {
            int64_t *mine = at.data() + (size_t)omp_get_thread_num() * m;
#pragma omp for schedule(static)
            for (int32_t u = 0; u < users; u++)
                for (int32_t p = 0; p < got[u]; p++) {
                    int32_t s = slot[items_of[start[u] + p]];
                    if (s >= 0)
                        mine[s]++;
                }
#pragma omp single
            for (size_t k = 0; k < m; k++)
                for (int64_t t = 0, sum = 0; t < nt; t++) {
                    int64_t c = at[(size_t)t * m + k];
                    at[(size_t)t * m + k] = sum;
                    sum += c;
                }
#pragma omp for schedule(static)
            for (int32_t u = 0; u < users; u++)
                for (int32_t p = 0; p < got[u]; p++) {
                    int32_t i = items_of[start[u] + p], s = slot[i];
                    if (s >= 0)
                        keys[s][mine[s]++] = keep_key(seed, u, i);
                }
        }
        std::vector<uint64_t> threshold(m);
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t k = 0; k < m; k++) {
            std::nth_element(keys[k].begin(), keys[k].begin() + (cap - 1), keys[k].end());
            threshold[k] = keys[k][cap - 1];
            std::vector<uint64_t>().swap(keys[k]);
        }
#pragma omp parallel for schedule(dynamic, 256)
        for (int32_t u = 0; u < users; u++) {
            int32_t *list = items_of.data() + start[u], n = 0;
            for (int32_t p = 0; p < got[u]; p++) {
                int32_t i = list[p], s = slot[i];
                if (s < 0 || keep_key(seed, u, i) <= threshold[s])
                    list[n++] = i;
            }
            got[u] = n;
        }
        if (round == max_rounds)
            return round;
        // Redraw among the items below the cap.
        std::vector<double> open(w);
        for (int32_t i = 0; i < items; i++)
            if (count[i] >= cap)
                open[i] = 0.0;
        item_sampler sampler(open);
#pragma omp parallel
        {
            std::vector<uint64_t> seen((items + 63) / 64), tree;
#pragma omp for schedule(dynamic, 256)
            for (int32_t u = 0; u < users; u++) {
                if (got[u] >= deg[u])
                    continue;
                int32_t *list = items_of.data() + start[u];
                for (int32_t p = 0; p < got[u]; p++)
                    seen[list[p] >> 6] |= 1ull << (list[p] & 63);
                uint64_t h = mix(seed ^ mix(0xd000000000ull + ((uint64_t)round << 32) + u));
                got[u] = draw_items(sampler, h, list, got[u], deg[u], seen, tree);
                for (int32_t p = 0; p < got[u]; p++)
                    seen[list[p] >> 6] = 0;
            }
        }
    }
}

static void generate(ratings *r, const ratings_shape &s)
{
    const int32_t users = shape_users(s), items = shape_items(s);
    const double target = shape_target(s);
    const uint64_t seed = s.seed;
    const int rank = s.rank;
    r->users = users, r->items = items;
    // Items: popularity weights, biases, planted factors.
    std::vector<int32_t> item_rank;
    if (s.item_law == RATINGS_ZIPF)
        item_rank = seeded_ranks(items, seed ^ 0xa000000000ull);
    std::vector<double> w(items), bi(items), Vs((size_t)items * rank);
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < items; i++) {
        w[i] = s.item_law == RATINGS_ZIPF
                   ? pow((double)item_rank[i], -s.item_skew)
                   : exp(s.item_skew * normal(seed ^ mix(0x1000000000ull + i)));
        bi[i] = s.item_bias * normal(seed ^ mix(0x2000000000ull + i));
        for (int t = 0; t < rank; t++)
            Vs[(size_t)i * rank + t] =
                s.factor_sd * normal(seed ^ mix(factor_key(0x3000000000ull, i, t)));
    }
    item_sampler sampler(w);
    // Users: degrees from the user law with the mean of the target, clipped to [1, cap], and
    // rescaled when the clipping moved the total by more than 0.5%.
    const int32_t cap_u = s.user_cap > 0 ? std::max(1, (int32_t)(s.user_cap * items)) : items;
    std::vector<double> raw(users);
    if (s.user_law == RATINGS_ZIPF) {
        std::vector<int32_t> user_rank = seeded_ranks(users, seed ^ 0xb000000000ull);
        double h = 0.0;
        for (int32_t x = users; x >= 1; x--)
            h += pow((double)x, -s.user_skew);
        for (int32_t u = 0; u < users; u++)
            raw[u] = target / h * pow((double)user_rank[u], -s.user_skew);
    } else {
        const double mu = log(target / users) - 0.5 * s.user_skew * s.user_skew;
#pragma omp parallel for schedule(static)
        for (int32_t u = 0; u < users; u++)
            raw[u] = exp(mu + s.user_skew * normal(seed ^ mix(0x4000000000ull + u)));
    }
    std::vector<int32_t> deg(users);
    double c = 1.0;
    if (fabs((double)degrees_at(raw, c, cap_u, NULL) - target) > 0.005 * target) {
        double lo = -40.0, hi = 40.0; // log c
        for (int it = 0; it < 100; it++) {
            double mid = 0.5 * (lo + hi);
            (degrees_at(raw, exp(mid), cap_u, NULL) < target ? lo : hi) = mid;
        }
        c = exp(hi);
    }
    degrees_at(raw, c, cap_u, &deg);
    std::vector<double>().swap(raw);
    std::vector<int64_t> start(users + 1, 0);
    for (int32_t u = 0; u < users; u++)
        start[u + 1] = start[u] + deg[u];
    std::vector<int32_t> items_of(start[users]);
    std::vector<int32_t> got(users);
#pragma omp parallel
    {
        std::vector<uint64_t> seen((items + 63) / 64), tree;
#pragma omp for schedule(dynamic, 256)
        for (int32_t u = 0; u < users; u++) {
            int32_t *out = items_of.data() + start[u];
            uint64_t h = mix(seed ^ mix(0x5000000000ull + u));
            int32_t n = draw_items(sampler, h, out, 0, deg[u], seen, tree);
            for (int32_t p = 0; p < n; p++)
                seen[out[p] >> 6] = 0;
            got[u] = n;
        }
    }
    int64_t cap_i = 0;
    int rounds = 0;
    if (s.item_cap > 0) {
        cap_i = std::max<int64_t>(1, (int64_t)(s.item_cap * users));
        rounds = enforce_item_cap(seed, users, items, cap_i, w, start, deg, got, items_of);
    }
    // Items nobody drew go to a hashed user each (the next one below its cap if that one is
    // at it).
    std::vector<int64_t> count =
        item_counts(users, items, start.data(), got.data(), items_of.data());
    std::vector<std::vector<int32_t>> extra(users);
    for (int32_t i = 0; i < items; i++)
        if (count[i] == 0) {
            int32_t u = (int32_t)(mix(seed ^ mix(0x6000000000ull + i)) % users);
            for (int32_t k = 0; k < users && got[u] + (int32_t)extra[u].size() >= cap_u; k++)
                u = (u + 1) % users;
            extra[u].push_back(i);
            count[i] = 1;
        }
    r->ptr.assign(users + 1, 0);
    for (int32_t u = 0; u < users; u++)
        r->ptr[u + 1] = r->ptr[u] + got[u] + (int64_t)extra[u].size();
    int64_t nnz = r->ptr[users];
    r->col.resize(nnz), r->val.resize(nnz), r->test.resize(nnz);
    // Per-user sums, added up in user order afterwards: the same bits at any thread count.
    std::vector<double> user_se(users), user_sum(users);
    std::vector<int32_t> user_n(users);
#pragma omp parallel
    {
        std::vector<double> Us(rank);
#pragma omp for schedule(dynamic, 256)
        for (int32_t u = 0; u < users; u++) {
            int32_t *c = r->col.data() + r->ptr[u];
            int32_t n = got[u];
            memcpy(c, items_of.data() + start[u], n * sizeof *c);
            for (int32_t i : extra[u])
                c[n++] = i;
            std::sort(c, c + n);
            double se = 0.0, sum = 0.0;
            int32_t tests = 0;
            double bu = s.user_bias * normal(seed ^ mix(0x7000000000ull + u));
            for (int t = 0; t < rank; t++)
                Us[t] = s.factor_sd * normal(seed ^ mix(factor_key(0x8000000000ull, u, t)));
            for (int32_t p = 0; p < n; p++) {
                int32_t i = c[p];
                double mean = s.mean + bu + bi[i];
                for (int t = 0; t < rank; t++)
                    mean += Us[t] * Vs[(size_t)i * rank + t];
                uint64_t key = rating_key(seed, u, i, items);
                double v = mean + s.noise * normal(key);
                if (s.stars)
                    v = std::min(s.hi, std::max(s.lo, round(v)));
                int64_t q = r->ptr[u] + p;
                r->val[q] = (float)v;
                sum += v;
                r->test[q] = unit(mix(key ^ 0xabcdefull)) < s.heldout;
                if (r->test[q]) {
                    double e = (s.stars ? std::min(s.hi, std::max(s.lo, mean)) : mean) - v;
                    se += e * e;
                    tests++;
                }
            }
            user_se[u] = se, user_sum[u] = sum, user_n[u] = tests;
        }
    }
    double oracle_se = 0.0, sum = 0.0;
    int64_t oracle_n = 0;
    int32_t max_user = 0;
    for (int32_t u = 0; u < users; u++) {
        oracle_se += user_se[u], sum += user_sum[u], oracle_n += user_n[u];
        max_user = std::max(max_user, (int32_t)(r->ptr[u + 1] - r->ptr[u]));
    }
    r->oracle_rmse = oracle_n ? sqrt(oracle_se / oracle_n) : NAN;
    ratings_stats &st = r->stats;
    st.target = target, st.nnz = nnz, st.max_user = max_user;
    st.max_item = *std::max_element(count.begin(), count.end());
    st.rare_items =
        (double)std::count_if(count.begin(), count.end(), [](int64_t x) { return x < 5; }) / items;
    st.mean_rating = nnz ? sum / nnz : NAN;
    st.oracle_rmse = r->oracle_rmse;
    st.item_cap = cap_i, st.cap_rounds = rounds;
}

// ---- into the library ----------------------------------------------------------------------

// Split r into train and test handles, the held-out entries copied out and the rest
// compacted in place (no second copy of the training set); r's arrays are released.
static void split(mf_ctx *ctx, ratings &r, mf_sparse **train, mf_sparse **test)
{
    const int32_t users = r.users;
    // A held-out rating of a user or item with no training rating stays in training: every
    // library scores the same test set then (cuMF_als's factors of an unrated row are NaN,
    // and so was its test RMSE on lognormal-cap45).
    std::vector<int64_t> item_train(r.items, 0);
    for (int32_t u = 0; u < users; u++)
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            item_train[r.col[p]] += !r.test[p];
    for (int32_t u = 0; u < users; u++) {
        int64_t kept = 0;
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            kept += !r.test[p];
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            if (r.test[p] && (kept == 0 || item_train[r.col[p]] == 0)) {
                r.test[p] = 0;
                kept++, item_train[r.col[p]]++;
            }
    }
    std::vector<int64_t> tptr(users + 1, 0);
#pragma omp parallel for schedule(static)
    for (int32_t u = 0; u < users; u++)
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            tptr[u + 1] += r.test[p];
    for (int32_t u = 0; u < users; u++)
        tptr[u + 1] += tptr[u];
    std::vector<int32_t> tcol(tptr[users]);
    std::vector<float> tval(tptr[users]);
#pragma omp parallel for schedule(static)
    for (int32_t u = 0; u < users; u++)
        for (int64_t p = r.ptr[u], q = tptr[u]; p < r.ptr[u + 1]; p++)
            if (r.test[p])
                tcol[q] = r.col[p], tval[q++] = r.val[p];
    int64_t n = 0, begin = 0; // begin: the user's first entry before compaction
    for (int32_t u = 0; u < users; u++) {
        int64_t end = r.ptr[u + 1];
        for (int64_t p = begin; p < end; p++)
            if (!r.test[p])
                r.col[n] = r.col[p], r.val[n++] = r.val[p];
        begin = end;
        r.ptr[u + 1] = n;
    }
    std::vector<uint8_t>().swap(r.test);
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, train, users, r.items, n, r.ptr.data(), r.col.data(),
                                     r.val.data(), MF_MEMORY_HOST, 0));
    std::vector<int32_t>().swap(r.col);
    std::vector<float>().swap(r.val);
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, test, users, r.items, tptr[users], tptr.data(),
                                     tcol.data(), tval.data(), MF_MEMORY_HOST, 0));
}

// The benchmark's ratings: --train and --test files in the packed binary triplet format
// when both are given, else the synthetic ratings of shape s. Returns the planted model's
// test RMSE (NaN for files); *stats (if not NULL) gets what the generator made.
static double load_ratings(mf_ctx *ctx, const char *train_file, const char *test_file,
                           const ratings_shape &s, mf_sparse **train, mf_sparse **test,
                           ratings_stats *stats)
{
    if (stats)
        *stats = ratings_stats();
    if (train_file && test_file) {
        mf_read_opts ro;
        mf_read_opts_init(&ro);
        ro.format = MF_FORMAT_BINARY_TRIPLETS;
        MF_CHECK(ctx, mf_sparse_read(ctx, train, train_file, &ro));
        MF_CHECK(ctx, mf_sparse_shape(*train, &ro.rows, &ro.cols, NULL));
        MF_CHECK(ctx, mf_sparse_read(ctx, test, test_file, &ro));
        return NAN;
    }
    ratings r;
    generate(&r, s);
    split(ctx, r, train, test);
    if (stats)
        *stats = r.stats;
    return r.oracle_rmse;
}

// The lines that head a case's table: the data, its shape in the --case syntax, what the
// generator made, and the planted model's own test RMSE.
static void print_ratings_case(mf_ctx *ctx, const ratings_shape &s, const ratings_stats &st,
                               double oracle, mf_sparse *train, mf_sparse *test, double seconds)
{
    int32_t users, items;
    int64_t ntrain, ntest;
    MF_CHECK(ctx, mf_sparse_shape(train, &users, &items, &ntrain));
    MF_CHECK(ctx, mf_sparse_shape(test, NULL, NULL, &ntest));
    printf("\ncase %s: %d users x %d items, %lld training and %lld test ratings (prepared in "
           "%.1f s)\n",
           s.label.c_str(), users, items, (long long)ntrain, (long long)ntest, seconds);
    if (isnan(oracle))
        return;
    printf("shape: %s\n", ratings_shape_line(s).c_str());
    char cap[48] = "";
    if (st.item_cap)
        snprintf(cap, sizeof cap, ", cap %lld", (long long)st.item_cap);
    printf("made: %lld ratings for a target of %.0f; most rated item: %lld users (%.1f%%%s); "
           "most active user: %d items (%.1f%%); items under 5 ratings: %.2f%%; mean rating "
           "%.3f\n",
           (long long)st.nnz, st.target, (long long)st.max_item, 100.0 * st.max_item / users, cap,
           st.max_user, 100.0 * st.max_user / items, 100.0 * st.rare_items, st.mean_rating);
    printf("best possible test RMSE (the planted model itself): %.4f\n", oracle);
}

#endif
