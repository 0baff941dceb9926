/*
 * class_weights: train.class_weights, one weight per vocabulary id, read from a .npy file
 * and attached to the corpus, where the device table and the window's weight sums come
 * from (docs/adaptations.md derives the objective sum_i w[y_i] loss_i / sum_i w[y_i]).
 */
#ifndef DDPTOK_CLASS_WEIGHTS_H
#define DDPTOK_CLASS_WEIGHTS_H

#include "corpus.h"
#include "err.h"
#include "settings.h"

/* Nothing without train.class_weights. Else reads the file (float32, one dimension, one
 * finite weight >= 0 per id the user's data spells, 0 .. vocab - 1 in the user's ids) and
 * sets c->class_weight (c->vocab entries in the corpus's ids: a file source's reserved
 * ids below DATA_RESERVED weigh 1) and c->seq_weight (per sequence: the sum of its
 * targets' weights, in double, positions ascending). ERR_CONFIG / ERR_DATA naming the
 * key and the file. */
int class_weights_attach(const struct settings *s, struct corpus *c, struct err *e);

#endif
