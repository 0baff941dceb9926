/*
 * spm: the C interface to libsentencepiece (see spm.h).
 */
/* the project's C headers, with C linkage */
extern "C" {
#include "err.h"
#include "tok_ids.h"
}
#include "spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

struct spm {
	sentencepiece::SentencePieceProcessor sp;
};

extern "C" int spm_load(struct spm **out, const char *path, struct err *e)
{
	*out = nullptr;
	struct spm *s = new (std::nothrow) struct spm;
	if (!s)
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	auto status = s->sp.Load(path);
	if (!status.ok()) {
		delete s;
		return ERR(e, ERR_DATA, "%s: not a SentencePiece model: %s", path,
			   status.ToString().c_str());
	}
	*out = s;
	return ERR_OK;
}

extern "C" void spm_free(struct spm *s)
{
	delete s;
}

extern "C" int32_t spm_vocab(const struct spm *s)
{
	return s->sp.GetPieceSize();
}

extern "C" int32_t spm_eos(const struct spm *s)
{
	return s->sp.eos_id();
}

extern "C" size_t spm_piece_bytes(const struct spm *s, int32_t id)
{
	if (id < 0 || id >= s->sp.GetPieceSize() || s->sp.IsControl(id) || s->sp.IsUnknown(id))
		return 0;
	if (s->sp.IsByte(id))
		return 1;
	const std::string &piece = s->sp.IdToPiece(id);
	size_t n = piece.size();
	for (size_t at = 0; (at = piece.find("\xe2\x96\x81", at)) != std::string::npos; at += 3)
		n -= 2; /* the space it stands for is one byte */
	return n;
}

extern "C" int spm_encode(const struct spm *s, const char *text, size_t n, struct tok_ids *out,
			  struct err *e)
{
	std::vector<int> ids;
	auto status = s->sp.Encode(absl::string_view(text, n), &ids);
	if (!status.ok())
		return ERR(e, ERR_DATA, "sentencepiece: %s", status.ToString().c_str());
	if (tok_ids_reserve(out, ids.size()))
		return ERR(e, ERR_NOMEM, "sentencepiece: out of memory");
	for (int id : ids)
		out->v[out->n++] = id;
	return ERR_OK;
}

extern "C" int spm_decode(const struct spm *s, const int32_t *ids, size_t n, char **text,
			  size_t *len, struct err *e)
{
	std::vector<int> v(ids, ids + n);
	std::string t;
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= s->sp.GetPieceSize())
			return ERR(e, ERR_DATA, "sentencepiece: id %d at %zu is outside the "
				   "vocabulary of %d", ids[i], i, s->sp.GetPieceSize());
	auto status = s->sp.Decode(v, &t);
	if (!status.ok())
		return ERR(e, ERR_DATA, "sentencepiece: %s", status.ToString().c_str());
	*text = static_cast<char *>(std::malloc(t.size() + 1));
	if (!*text)
		return ERR(e, ERR_NOMEM, "sentencepiece: out of memory");
	std::memcpy(*text, t.data(), t.size());
	(*text)[t.size()] = '\0';
	*len = t.size();
	return ERR_OK;
}

extern "C" int spm_train(const char *input, const char *model_prefix, int32_t vocab,
			 const char *model_type, int threads, struct err *e)
{
	/* as a map, so that a path with spaces stays one value */
	const std::unordered_map<std::string, std::string> args = {
		{"input", input}, {"model_prefix", model_prefix},
		{"vocab_size", std::to_string(vocab)}, {"model_type", model_type},
		{"byte_fallback", "true"}, {"normalization_rule_name", "identity"},
		{"remove_extra_whitespaces", "false"}, {"split_digits", "true"},
		{"character_coverage", "1.0"}, {"max_sentence_length", "1000000"},
		{"num_threads", std::to_string(threads)}, {"minloglevel", "2"},
	};
	auto status = sentencepiece::SentencePieceTrainer::Train(args);
	if (!status.ok())
		return ERR(e, ERR_DATA, "%s: training a SentencePiece %s model of %d ids: %s", input,
			   model_type, vocab, status.ToString().c_str());
	return ERR_OK;
}
