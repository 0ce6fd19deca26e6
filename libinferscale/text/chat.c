/* Chat prompts: the known template families rendered directly, without a
 * Jinja engine. A model's template is recognised by its markers; the one
 * thing read out of it is the literal default system message that ChatML
 * templates such as SmolLM2's and Qwen2.5's insert when the conversation
 * has none. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* The default system message of a ChatML template: the first literal
 * '<|im_start|>system\n...<|im_end|>' whose text holds no template code,
 * in a template that tests the first message's role. Returns a malloc'd
 * string, or NULL when there is none. */
static char *default_system(const char *tmpl)
{
	if (!strstr(tmpl, "'system'") && !strstr(tmpl, "\"system\""))
		return NULL;
	static const char open[] = "<|im_start|>system";
	for (const char *p = strstr(tmpl, open); p; p = strstr(p + 1, open)) {
		const char *s = p + sizeof open - 1;
		if (*s == '\n')
			s++;
		else if (s[0] == '\\' && s[1] == 'n')
			s += 2;
		else
			continue;
		const char *e = strstr(s, "<|im_end|>");
		if (!e)
			return NULL;
		if (memchr(s, '\'', (size_t)(e - s)) || memchr(s, '"', (size_t)(e - s)) || memchr(s, '{', (size_t)(e - s)))
			continue;
		char *out = malloc((size_t)(e - s) + 1);
		if (!out)
			return NULL;
		size_t n = 0;
		for (const char *q = s; q < e; q++) {
			if (q[0] == '\\' && q + 1 < e && q[1] == 'n') {
				out[n++] = '\n';
				q++;
			} else {
				out[n++] = *q;
			}
		}
		out[n] = '\0';
		return out;
	}
	return NULL;
}

static int detect(const char *tmpl, infs_chat_format *out)
{
	if (!tmpl) {
		*out = INFS_CHAT_CHATML;
		return INFS_OK;
	}
	if (strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<|im_end|>")) {
		*out = INFS_CHAT_CHATML;
		return INFS_OK;
	}
	if (strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "<|eot_id|>")) {
		/* Llama 3.1 and later open with a dated system header. */
		*out = strstr(tmpl, "Cutting Knowledge Date") ? INFS_CHAT_LLAMA31 : INFS_CHAT_LLAMA3;
		return INFS_OK;
	}
	if (strstr(tmpl, "[INST]") && strstr(tmpl, "[/INST]")) {
		*out = INFS_CHAT_MISTRAL;
		return INFS_OK;
	}
	return infs__error(INFS_EUNSUPPORTED,
	                   "chat template not recognised (neither ChatML, Llama 3 nor Mistral): \"%.80s\"; pass an "
	                   "explicit infs_chat_format",
	                   tmpl);
}

int infs_chat_format_detect(const infs_tokenizer *tok, infs_chat_format *out)
{
	if (!tok || !out)
		return infs__error(INFS_EINVAL, "infs_chat_format_detect: %s is NULL", tok ? "out" : "tok");
	return detect(tok->chat_template, out);
}

/* Python's str.isspace, which Jinja's trim filter strips. */
static int py_space(uint32_t cp)
{
	return infs__uc_is_space(cp) || (cp >= 0x1c && cp <= 0x1f);
}

/* content without leading and trailing whitespace. */
static void put_trimmed(infs__buf *b, const char *s)
{
	const uint8_t *p = (const uint8_t *)s, *end = p + strlen(s);
	uint32_t cp;
	int k;
	while (p < end && (k = infs__utf8_decode(p, (size_t)(end - p), &cp)) > 0 && py_space(cp))
		p += k;
	const uint8_t *last = p; /* end of the last non-space character */
	for (const uint8_t *q = p; q < end;) {
		k = infs__utf8_decode(q, (size_t)(end - q), &cp);
		if (k < 0) {
			q += -k;
			last = q;
			continue;
		}
		q += k;
		if (!py_space(cp))
			last = q;
	}
	infs__buf_put(b, (const char *)p, (size_t)(last - p));
}

static void render_chatml(infs__buf *b, const char *system, const infs_chat_message *m, size_t n, int gen)
{
	if (system && n > 0 && strcmp(m[0].role, "system") != 0) {
		infs__buf_puts(b, "<|im_start|>system\n");
		infs__buf_puts(b, system);
		infs__buf_puts(b, "<|im_end|>\n");
	}
	for (size_t i = 0; i < n; i++) {
		infs__buf_puts(b, "<|im_start|>");
		infs__buf_puts(b, m[i].role);
		infs__buf_puts(b, "\n");
		infs__buf_puts(b, m[i].content);
		infs__buf_puts(b, "<|im_end|>\n");
	}
	if (gen)
		infs__buf_puts(b, "<|im_start|>assistant\n");
}

static void render_llama3(infs__buf *b, const infs_chat_message *m, size_t n, int gen)
{
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			infs__buf_puts(b, "<|begin_of_text|>");
		infs__buf_puts(b, "<|start_header_id|>");
		infs__buf_puts(b, m[i].role);
		infs__buf_puts(b, "<|end_header_id|>\n\n");
		put_trimmed(b, m[i].content);
		infs__buf_puts(b, "<|eot_id|>");
	}
	if (gen)
		infs__buf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 3.1+: the system turn always comes first, holding the knowledge
 * cutoff, the date and the system message (if any, trimmed). The date is
 * Llama 3.1's fixed "26 Jul 2024", or today's, as transformers' strftime_now
 * gives it, for the templates that ask for it (Llama 3.2, 3.3). */
static void render_llama31(infs__buf *b, const char *tmpl, const infs_chat_message *m, size_t n, int gen)
{
	char date[32] = "26 Jul 2024";
	if (tmpl && strstr(tmpl, "strftime_now")) {
		time_t now = time(NULL);
		struct tm tm;
		if (localtime_r(&now, &tm))
			strftime(date, sizeof date, "%d %b %Y", &tm);
	}
	size_t first = 0;
	infs__buf_puts(b, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
	         "Cutting Knowledge Date: December 2023\nToday Date: ");
	infs__buf_puts(b, date);
	infs__buf_puts(b, "\n\n");
	if (n > 0 && strcmp(m[0].role, "system") == 0) {
		put_trimmed(b, m[0].content);
		first = 1;
	}
	infs__buf_puts(b, "<|eot_id|>");
	for (size_t i = first; i < n; i++) {
		infs__buf_puts(b, "<|start_header_id|>");
		infs__buf_puts(b, m[i].role);
		infs__buf_puts(b, "<|end_header_id|>\n\n");
		put_trimmed(b, m[i].content);
		infs__buf_puts(b, "<|eot_id|>");
	}
	if (gen)
		infs__buf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static int render_mistral(infs__buf *b, const infs_chat_message *m, size_t n)
{
	size_t first = 0;
	const char *system = NULL;
	if (n > 0 && strcmp(m[0].role, "system") == 0) {
		system = m[0].content;
		first = 1;
	}
	infs__buf_puts(b, "<s>");
	for (size_t i = first; i < n; i++) {
		int user = (i - first) % 2 == 0;
		if (strcmp(m[i].role, user ? "user" : "assistant") != 0)
			return infs__error(INFS_EINVAL,
			                   "infs_chat_render: the Mistral format needs user and assistant turns in "
			                   "alternation after an optional system message; message %zu is '%s'",
			                   i, m[i].role);
		if (user) {
			infs__buf_puts(b, "[INST] ");
			if (system && i == first) {
				infs__buf_puts(b, system);
				infs__buf_puts(b, "\n\n");
			}
			infs__buf_puts(b, m[i].content);
			infs__buf_puts(b, " [/INST]");
		} else {
			infs__buf_puts(b, m[i].content);
			infs__buf_puts(b, "</s>");
		}
	}
	return INFS_OK;
}

int infs_chat_render(const infs_tokenizer *tok, infs_chat_format format, const infs_chat_message *messages,
                     size_t n_messages, unsigned flags, char *out, size_t cap, size_t *n_out)
{
	if (!n_out || (!messages && n_messages) || (!out && cap) || (!tok && format == INFS_CHAT_AUTO))
		return infs__error(INFS_EINVAL, "infs_chat_render: %s is NULL",
		                   !n_out ? "n_out" : !out && cap ? "out" : !tok ? "tok" : "messages");
	if ((unsigned)format > INFS_CHAT_LLAMA31)
		return infs__error(INFS_EINVAL, "infs_chat_render: unknown format %d", (int)format);
	if (flags & ~(unsigned)INFS_CHAT_ADD_GENERATION_PROMPT)
		return infs__error(INFS_EINVAL, "infs_chat_render: unknown flags 0x%x", flags);
	for (size_t i = 0; i < n_messages; i++)
		if (!messages[i].role || !messages[i].content)
			return infs__error(INFS_EINVAL, "infs_chat_render: message %zu has a NULL %s", i,
			                   messages[i].role ? "content" : "role");
	const char *tmpl = tok ? tok->chat_template : NULL;
	if (format == INFS_CHAT_AUTO) {
		int rc = detect(tmpl, &format);
		if (rc != INFS_OK)
			return rc;
	}
	int gen = (flags & INFS_CHAT_ADD_GENERATION_PROMPT) != 0;
	infs__buf b = { 0 };
	int rc = INFS_OK;
	char *system = NULL;
	switch (format) {
	case INFS_CHAT_LLAMA3: render_llama3(&b, messages, n_messages, gen); break;
	case INFS_CHAT_LLAMA31: render_llama31(&b, tmpl, messages, n_messages, gen); break;
	case INFS_CHAT_MISTRAL: rc = render_mistral(&b, messages, n_messages); break;
	default:
		system = tmpl ? default_system(tmpl) : NULL;
		render_chatml(&b, system, messages, n_messages, gen);
		break;
	}
	free(system);
	if (rc == INFS_OK && b.failed)
		rc = infs__error(INFS_ENOMEM, "infs_chat_render: no memory");
	if (rc != INFS_OK) {
		infs__buf_free(&b);
		return rc;
	}
	*n_out = b.n;
	if (!out && cap == 0) {
		infs__buf_free(&b);
		return INFS_OK;
	}
	if (b.n >= cap) {
		infs__buf_free(&b);
		return infs__error(INFS_ERANGE, "infs_chat_render: %zu bytes and a NUL do not fit in %zu", *n_out, cap);
	}
	memcpy(out, b.n ? b.p : "", b.n);
	out[b.n] = '\0';
	infs__buf_free(&b);
	return INFS_OK;
}

int infs_chat_tokenize(const infs_tokenizer *tok, infs_chat_format format, const infs_chat_message *messages,
                       size_t n_messages, unsigned flags, infs_token *out, size_t cap, size_t *n_out)
{
	if (!tok || !n_out || (!out && cap))
		return infs__error(INFS_EINVAL, "infs_chat_tokenize: %s is NULL", !tok ? "tok" : !n_out ? "n_out" : "out");
	size_t len = 0;
	int rc = infs_chat_render(tok, format, messages, n_messages, flags, NULL, 0, &len);
	if (rc != INFS_OK)
		return rc;
	char *text = malloc(len + 1);
	if (!text)
		return infs__error(INFS_ENOMEM, "infs_chat_tokenize: no memory");
	rc = infs_chat_render(tok, format, messages, n_messages, flags, text, len + 1, &len);
	if (rc == INFS_OK)
		rc = infs_tokenize(tok, text, len, INFS_TOKENIZE_PARSE_SPECIAL, out, cap, n_out);
	free(text);
	return rc;
}
