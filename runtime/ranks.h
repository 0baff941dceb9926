/*
 * ranks: the most data-parallel ranks (devices) one process runs. Every per-rank array of
 * the runtime and the program is sized by it, and [devices] world is bounded by it.
 */
#ifndef DDPTOK_RANKS_H
#define DDPTOK_RANKS_H

#define MAX_WORLD 8

#endif
