/* sim_backend.c - the descriptor of the simulated store (backend.h):
 * "sim:NAME", the simulation usim_new() registered under NAME. It takes
 * only the options of every store. */
#include "store/backend.h"
#include "store/sim/sim.h"

static const ustore_scheme schemes[] = {{"sim:", "sim:NAME"}};

static int sim_open(ustore **out, size_t scheme, const char *loc,
                    const struct ustore_opts *opts, ustore_err *e) {
  (void)scheme;
  return ustore_sim_open(out, loc, opts, e);
}

const ustore_backend ustore_sim_backend = {
    "sim", NULL,
    schemes, sizeof schemes / sizeof schemes[0],
    NULL, 0,
    ustore_sim_caps, sim_open, NULL, /* (no change stream) */
};
