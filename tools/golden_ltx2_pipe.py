#!/usr/bin/env python3
"""Golden data for the whole LTX-2.5 text-to-video-and-audio pipeline (src/pipelines/ltx2_pipe.h, `cortiq video`):
a tiny random diffusers LTX2Pipeline folder, every component chained at consistent widths, run end to end by
diffusers' own LTX2Pipeline.__call__ on the CPU in float32 (TF32 off), noise from torch.Generator("cpu").

The folder (model/, converted by the tests with `cortiq convert`):
    tokenizer/      a small SentencePiece-style BPE (tokenizers): "<pad>" 0, "<eos>" 1, "<bos>" 2, "<unk>" 3, the
                    256 byte-fallback tokens, "▁" and a-z, a few merges; spaces -> "▁"; "<bos> $A" post-processor
    text_encoder/   Gemma4ForCausalLM, golden_gemma4's tiny config (6 layers, sliding + full, k = v) at vocab 320
    connectors/     LTX2TextConnectors over its 7 hidden states (64 wide): video 2 x 32, audio 2 x 16, 2 blocks,
                    8 registers
    transformer/    golden_ltx2_dit's tiny DiT with 16 latent channels in and out, audio 4 in and out
    vae/            golden_ltx2_vae's tiny video VAE with 16 latent channels (x16 space, x8 time), encoder kept
    audio_vae/      golden_ltx2_audio's tiny audio VAE (2 latent channels x 2 latent mel bins), decoder only
    vocoder/        golden_ltx2_audio's tiny vocoder with the bandwidth extender (16 kHz -> 48 kHz, stereo)
    scheduler/      the distilled checkpoints' FlowMatchEulerDiscreteScheduler config (no dynamic shifting)
    latent_upsampler/  golden_ltx2_upsampler's tiny x2 upscaler at 16 channels (not in model_index.json: the released
                    folders carry it beside the pipeline's components; drawn last, so the others are unchanged)
    first_frame.png an 80 x 40 RGB picture (the image-to-video cases' first frame; resized by the pipeline)
Every weight is drawn from a fixed generator, rounded to bf16 and stored in bf16; the run reads them in f32.

Cases (64 x 32 pixels, 9 frames at 24 fps: latents 2 x 2 x 4, 9 audio latent frames; max_sequence_length 32):
    distilled  the distilled recipe: the 8-step ladder, no guidance (guidance 1, audio guidance 1, STG 0,
               modality 1), seed 42
    guided     4 linspace steps with every guidance term: CFG 3 (audio 7) against the negative prompt, STG 1 on
               block 1, modality isolation 3, guidance rescale 0.7, seed 7
    two_stage  the distilled two-stage recipe at 128 x 64: LTX2Pipeline at 64 x 32 (8 ladder steps, latents out),
               LTX2LatentUpsamplePipeline, LTX2Pipeline on the upscaled latents and stage 1's sound (noise_scale and
               sigmas STAGE_2_DISTILLED_SIGMA_VALUES, 3 steps), one generator throughout, seed 11
    i2v        LTX2ImageToVideoPipeline at 64 x 32 from first_frame.png (image_crf 0), 4 linspace steps, CFG 2
               (audio 2) against the negative prompt, seed 5
    i2v_two_stage  the two-stage recipe with LTX2ImageToVideoPipeline for both stages (first frame at 64 x 32), seed 3
Recorded per case (cases/<name>.safetensors, batch dropped, f32):
    ctx, audio_ctx [32, 64] / [32, 32]   the connectors' outputs for the prompt (neg_ctx, neg_audio_ctx: the
                                         negative prompt's, guided only)
    ids [32] (int32)                     the prompt's token ids, left-padded
    noise, audio_noise                   the packed initial latents (prepare_latents / prepare_audio_latents)
    step<i>                              the packed video latents after step i (the sampler's trace; latents
                                         is the last)
    vae_in [16, 2, 2, 4]                 the de-normalised latents the video VAE decodes
    audio_vae_in [2, 9, 2], mel [2, 33, 8]  the de-normalised audio latents the audio VAE decodes, its mel
    frames [9, 32, 64, 3]                the decoded video as the pipeline returns it (output_type "np": [0, 1])
    audio [n, 2]                         the vocoder's 48 kHz waveform, interleaved
The staged cases add stage1_step<i> (stage 1's trace; stage1_latents its last), up (the upscaler's de-normalised
output, channels-last [F*H*W, C]), stage2_init / stage2_audio_init (stage 2's re-noised packed state, as noise and
audio_noise hold stage 1's); step<i> is then stage 2's trace.
index.json holds the prompts, settings, each output's RMS and the same run in bf16 (every component in bf16 as a
bf16 checkpoint loads): bf16_max_rel = max|bf16 - f32| / scale, scale = RMS (latents, contexts) or 1 (frames,
audio: full scale); a GPU path must stay within a quarter of it. outputs.audio.f32_vs_f64_max: the reference's own
float32 sound against the audio VAE and vocoder in float64 on the same latents.

Usage, from the repository root (torch, transformers with Gemma-4, tokenizers; diffusers' source at 58eb52c0 on
PYTHONPATH, with tools/ for the component generators):
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_ltx2_pipe.py --out tests/golden/ltx2_pipe
--only NAME,... makes just those cases and keeps the others' files and index entries (the model folder's existing
components are not rewritten).
"""
import argparse
import copy
import json
import os
import sys

import torch
from safetensors.torch import save_file

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 4 << 20
MAX_LEN = 32
WIDTH, HEIGHT, FRAMES, FPS = 64, 32, 9, 24.0
CASES = {
    "distilled": dict(prompt="  a red fox runs, 2 birds sing  ", negative=None, seed=42, steps=8, sigmas="distilled",
                      guidance_scale=1.0, audio_guidance_scale=1.0, stg_scale=0.0, audio_stg_scale=0.0,
                      modality_scale=1.0, audio_modality_scale=1.0, guidance_rescale=0.0, audio_guidance_rescale=0.0,
                      stg_blocks=None),
    "guided": dict(prompt="the sea at night; waves élan", negative="blurry, quiet", seed=7, steps=4, sigmas=None,
                   guidance_scale=3.0, audio_guidance_scale=7.0, stg_scale=1.0, audio_stg_scale=1.0,
                   modality_scale=3.0, audio_modality_scale=3.0, guidance_rescale=0.7, audio_guidance_rescale=0.7,
                   stg_blocks=[1]),
    "two_stage": dict(kind="t2v", two_stage=True, prompt="a red fox runs, 2 birds sing", negative=None, seed=11,
                      width=128, height=64, steps=8, sigmas="distilled", guidance_scale=1.0, audio_guidance_scale=1.0),
    "i2v": dict(kind="i2v", two_stage=False, prompt="the sea at night", negative="blurry", seed=5, width=64,
                height=32, steps=4, sigmas=None, guidance_scale=2.0, audio_guidance_scale=2.0),
    "i2v_two_stage": dict(kind="i2v", two_stage=True, prompt="a red fox runs", negative=None, seed=3, width=128,
                          height=64, steps=8, sigmas="distilled", guidance_scale=1.0, audio_guidance_scale=1.0),
}
IMAGE_W, IMAGE_H = 80, 40


def fail(msg):
    sys.exit(f"golden_ltx2_pipe: {msg}")


def shim_transformers():
    """pipeline_ltx2 imports Gemma-3 / Gemma-4 multimodal classes only for its type hints; a transformers without
    some of them gets stand-ins so the pipeline module imports (the text encoder here is Gemma4ForCausalLM)."""
    import transformers
    for n in ("Gemma3ForConditionalGeneration", "Gemma4ForConditionalGeneration",
              "Gemma4UnifiedForConditionalGeneration", "GemmaTokenizer", "GemmaTokenizerFast", "ProcessorMixin"):
        try:
            getattr(transformers, n)
        except (AttributeError, ImportError):
            setattr(transformers, n, type(n, (), {}))
            print(f"note: transformers {transformers.__version__} lacks {n}; a stand-in for the type hint")
    return transformers


def make_tokenizer(path):
    from tokenizers import Tokenizer, decoders, models, normalizers, processors
    from transformers import PreTrainedTokenizerFast
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in ["\u2581"] + [chr(ord("a") + i) for i in range(26)]:
        vocab[c] = len(vocab)
    merges = [("\u2581", "a"), ("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("\u2581", "s"), ("i", "n"),
              ("r", "e"), ("\u2581", "r"), ("e", "d"), ("\u2581r", "ed"), ("o", "x"), ("\u2581", "f"),
              ("\u2581f", "ox"), ("u", "n"), ("\u2581r", "un"), ("a", "t"), ("\u2581s", "e"), ("\u2581se", "a")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    for t in ("<pad>", "<eos>", "<bos>", "<unk>"):
        tok.add_special_tokens([t])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>", padding_side="left", model_max_length=MAX_LEN)
    fast.save_pretrained(path)
    return fast, len(vocab)


def bf16_copy(module):
    m = copy.deepcopy(module).to(torch.bfloat16)
    for mod in m.modules():  # RoPE frequencies stay f32, as a bf16 checkpoint loads them
        for bname, buf in list(mod.named_buffers(recurse=False)):
            if "inv_freq" in bname:
                setattr(mod, bname, buf.float())
    return m


def first_frame(path, seed):
    from PIL import Image
    g = torch.Generator().manual_seed(seed)
    y = torch.linspace(0, 1, IMAGE_H)[:, None, None]
    x = torch.linspace(0, 1, IMAGE_W)[None, :, None]
    base = torch.cat([x.expand(IMAGE_H, IMAGE_W, 1), y.expand(IMAGE_H, IMAGE_W, 1),
                      (1 - x * y).expand(IMAGE_H, IMAGE_W, 1)], 2)
    img = (base * 200 + 40 * torch.rand(IMAGE_H, IMAGE_W, 3, generator=g)).round().clamp(0, 255).to(torch.uint8)
    Image.fromarray(img.numpy(), "RGB").save(path)
    return Image.open(path).convert("RGB")


def build(out, seed, keep=False):
    import golden_gemma4 as gg
    import golden_ltx2_audio as ga
    import golden_ltx2_dit as gd
    import golden_ltx2_text as gt
    import golden_ltx2_vae as gv
    from diffusers import AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler
    from diffusers.models.autoencoders.autoencoder_kl_ltx2_audio import AutoencoderKLLTX2Audio
    from diffusers.models.transformers.transformer_ltx2 import LTX2VideoTransformer3DModel
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

    m = os.path.join(out, "model")
    os.makedirs(m, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    tok, n_vocab = make_tokenizer(os.path.join(m, "tokenizer"))

    transformers, GConfig, GModel = gg.need_gemma4(False)
    gg.CONFIG["vocab_size"] = 320
    if n_vocab > 320:
        fail(f"the tokenizer has {n_vocab} entries, the tower's vocabulary 320")
    te, _ = gg.make_model(GConfig, GModel, seed + 1, False)
    bf16_copy(te).save_pretrained(os.path.join(m, "text_encoder"), safe_serialization=True)
    L = len(gg.LAYER_TYPES) + 1

    ccfg = gt.model_config(gg.CONFIG["hidden_size"], L, 2, 32, 2, 16, 2, 8)
    conn = LTX2TextConnectors(**ccfg).float().eval()
    gt.randomise(conn, gen)

    dcfg = dict(gd.CONFIG, in_channels=16, out_channels=16, audio_in_channels=4, audio_out_channels=4,
                cross_attention_dim=64, audio_cross_attention_dim=32)
    dit = LTX2VideoTransformer3DModel(**dcfg).float().eval()
    gd.randomise(dit, gen)

    vcfg = dict(gv.MODEL, latent_channels=16)
    vae = AutoencoderKLLTX2Video(**vcfg).float().eval()
    gv.randomise(vae, gen)

    avae = AutoencoderKLLTX2Audio(**ga.VAE_CONFIG).float().eval()
    ga.randomise(avae, gen, stats=True)
    voc = LTX2VocoderWithBWE(**ga.VOC_CONFIG).float().eval()
    ga.randomise(voc, gen)
    ga.stft_tables(voc, ga.VOC_CONFIG)
    import golden_ltx2_upsampler as gu
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel
    ucfg = dict(gu.MODEL, in_channels=16)
    ups = LTX2LatentUpsamplerModel(**ucfg).float().eval()
    gu.randomise(ups, gen)

    def fresh(name):
        return not (keep and os.path.isdir(os.path.join(m, name)))
    for name, mod in (("connectors", conn), ("transformer", dit), ("vae", vae), ("latent_upsampler", ups)):
        if fresh(name):
            copy.deepcopy(mod).to(torch.bfloat16).save_pretrained(os.path.join(m, name), safe_serialization=True)
    if fresh("audio_vae"):
        ga.save_folder(avae, lambda k: not k.startswith("encoder."), os.path.join(m, "audio_vae"))
    if fresh("vocoder"):
        ga.save_folder(voc, lambda k: k != "mel_stft.stft_fn.inverse_basis", os.path.join(m, "vocoder"))
    image = first_frame(os.path.join(m, "first_frame.png"), seed + 2)

    sched = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=False, base_shift=0.95, max_shift=2.05,
                                            base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=None)
    sched.save_config(os.path.join(m, "scheduler"))
    index = {"_class_name": "LTX2Pipeline", "_diffusers_version": "0.40.0.dev0",
             "audio_vae": ["diffusers", "AutoencoderKLLTX2Audio"], "connectors": ["diffusers", "LTX2TextConnectors"],
             "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
             "text_encoder": ["transformers", "Gemma4ForCausalLM"],
             "tokenizer": ["transformers", "PreTrainedTokenizerFast"],
             "transformer": ["diffusers", "LTX2VideoTransformer3DModel"], "vae": ["diffusers", "AutoencoderKLLTX2Video"],
             "vocoder": ["diffusers", "LTX2VocoderWithBWE"]}
    with open(os.path.join(m, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2)
    parts = dict(tokenizer=tok, text_encoder=te, connectors=conn, transformer=dit, vae=vae, audio_vae=avae,
                 vocoder=voc, scheduler=sched)
    configs = dict(connectors=ccfg, transformer=dcfg, vae=vcfg, audio_vae=ga.VAE_CONFIG, vocoder=ga.VOC_CONFIG,
                   gemma4=dict(gg.CONFIG), latent_upsampler=ucfg)
    return parts, configs, transformers, ups, image


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def run(pipe_cls, parts, case, bf16):
    comp = dict(parts)
    comp["scheduler"] = copy.deepcopy(parts["scheduler"])
    if bf16:
        for k in ("text_encoder", "connectors", "transformer", "vae", "audio_vae", "vocoder"):
            comp[k] = bf16_copy(parts[k])
    pipe = pipe_cls(**comp)
    pipe.set_progress_bar_config(disable=True)
    rec = {}

    def grab_conn(mod, args, out):
        v, a = out[0], out[1]
        if v.shape[0] == 2:  # [negative, positive]
            rec["neg_ctx"], rec["neg_audio_ctx"] = c32(v[0]), c32(a[0])
            v, a = v[1:], a[1:]
        rec["ctx"], rec["audio_ctx"] = c32(v[0]), c32(a[0])
    hook = pipe.connectors.register_forward_hook(grab_conn)
    orig = dict(pl=pipe.prepare_latents, pa=pipe.prepare_audio_latents, vd=pipe.vae.decode,
                ad=pipe.audio_vae.decode)

    def pl(*a, **k):
        x = orig["pl"](*a, **k)
        rec["noise"] = c32(x[0])
        return x

    def pa(*a, **k):
        x = orig["pa"](*a, **k)
        rec["audio_noise"] = c32(x[0])
        return x

    def vd(z, *a, **k):  # the de-normalised [1, C, F, h, w] latents the video VAE decodes
        rec["vae_in"] = c32(z[0])
        return orig["vd"](z, *a, **k)

    def ad(z, *a, **k):  # the de-normalised, unpacked [1, C, L, M] latents the audio VAE decodes, and its mel
        rec["audio_vae_in"] = c32(z[0])
        r = orig["ad"](z, *a, **k)
        rec["mel"] = c32(r[0][0])
        return r
    pipe.prepare_latents, pipe.prepare_audio_latents = pl, pa
    pipe.vae.decode, pipe.audio_vae.decode = vd, ad

    def on_step(p, i, t, kw):
        rec[f"step{i}"] = c32(kw["latents"][0])
        return {}
    gen = torch.Generator("cpu").manual_seed(case["seed"])
    try:
        video, audio = pipe(
            prompt=case["prompt"], negative_prompt=case["negative"], height=HEIGHT, width=WIDTH, num_frames=FRAMES,
            frame_rate=FPS, num_inference_steps=case["steps"], sigmas=case["sigmas"],
            guidance_scale=case["guidance_scale"], audio_guidance_scale=case["audio_guidance_scale"],
            stg_scale=case["stg_scale"], audio_stg_scale=case["audio_stg_scale"],
            modality_scale=case["modality_scale"], audio_modality_scale=case["audio_modality_scale"],
            guidance_rescale=case["guidance_rescale"], audio_guidance_rescale=case["audio_guidance_rescale"],
            spatio_temporal_guidance_blocks=case["stg_blocks"], generator=gen, max_sequence_length=MAX_LEN,
            callback_on_step_end=on_step, callback_on_step_end_tensor_inputs=["latents"], output_type="np",
            return_dict=False)
    finally:
        hook.remove()
        del pipe.vae.decode, pipe.audio_vae.decode
    rec["latents"] = rec[f"step{case['steps'] - 1}"].clone()
    rec["frames"] = c32(torch.as_tensor(video[0]))
    rec["audio"] = c32(torch.as_tensor(audio[0]).transpose(0, 1))
    ids = pipe.tokenizer([case["prompt"].strip()], padding="max_length", max_length=MAX_LEN, truncation=True,
                         add_special_tokens=True, return_tensors="pt").input_ids
    rec["ids"] = ids[0].to(torch.int32).contiguous()
    for k in ("noise", "audio_noise", "ctx", "audio_ctx", "vae_in", "audio_vae_in", "mel"):
        if k not in rec:
            fail(f"the pipeline run recorded no {k}: not diffusers {DIFFUSERS_COMMIT}?")
    return rec


def run_staged(parts, ups, image, case, bf16):
    """The image-to-video and two-stage cases: one or two pipeline calls (and the upscaler between), recorded."""
    from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_image2video import LTX2ImageToVideoPipeline
    from diffusers.pipelines.ltx2.pipeline_ltx2_latent_upsample import LTX2LatentUpsamplePipeline
    from diffusers.pipelines.ltx2.utils import STAGE_2_DISTILLED_SIGMA_VALUES as S2
    comp = dict(parts)
    comp["scheduler"] = copy.deepcopy(parts["scheduler"])
    if bf16:
        for k in ("text_encoder", "connectors", "transformer", "vae", "audio_vae", "vocoder"):
            comp[k] = bf16_copy(parts[k])
    i2v = case["kind"] == "i2v"
    pipe = (LTX2ImageToVideoPipeline if i2v else LTX2Pipeline)(**comp)
    pipe.set_progress_bar_config(disable=True)
    rec, stage = {}, [1]
    orig = dict(pl=pipe.prepare_latents, pa=pipe.prepare_audio_latents, vd=pipe.vae.decode,
                ad=pipe.audio_vae.decode)

    def pl(*a, **k):
        x = orig["pl"](*a, **k)
        rec["noise" if stage[0] == 1 else "stage2_init"] = c32((x[0] if i2v else x)[0])
        return x

    def pa(*a, **k):
        x = orig["pa"](*a, **k)
        rec["audio_noise" if stage[0] == 1 else "stage2_audio_init"] = c32(x[0])
        return x

    def vd(z, *a, **k):
        rec["vae_in"] = c32(z[0])
        return orig["vd"](z, *a, **k)

    def ad(z, *a, **k):
        rec["audio_vae_in"] = c32(z[0])
        r = orig["ad"](z, *a, **k)
        rec["mel"] = c32(r[0][0])
        return r
    pipe.prepare_latents, pipe.prepare_audio_latents = pl, pa
    pipe.vae.decode, pipe.audio_vae.decode = vd, ad

    def on_step(p, i, t, kw):
        rec[("stage1_step" if stage[0] == 1 and case["two_stage"] else "step") + str(i)] = c32(kw["latents"][0])
        return {}
    gen = torch.Generator("cpu").manual_seed(case["seed"])
    sig = case["sigmas"]
    W, H = (case["width"] // 2, case["height"] // 2) if case["two_stage"] else (case["width"], case["height"])
    common = dict(prompt=case["prompt"], negative_prompt=case["negative"], num_frames=FRAMES, frame_rate=FPS,
                  generator=gen, max_sequence_length=MAX_LEN, callback_on_step_end=on_step,
                  callback_on_step_end_tensor_inputs=["latents"], return_dict=False)
    if i2v:
        common["image_crf"] = 0
    try:
        video, audio = pipe(image=image if i2v else None, height=H, width=W, num_inference_steps=case["steps"],
                            sigmas=sig, guidance_scale=case["guidance_scale"],
                            audio_guidance_scale=case["audio_guidance_scale"],
                            output_type="latent" if case["two_stage"] else "np", **common) if i2v else \
            pipe(height=H, width=W, num_inference_steps=case["steps"], sigmas=sig,
                 guidance_scale=case["guidance_scale"], audio_guidance_scale=case["audio_guidance_scale"],
                 output_type="latent" if case["two_stage"] else "np", **common)
        if case["two_stage"]:
            rec["stage1_latents"] = rec[f"stage1_step{case['steps'] - 1}"].clone()
            u = ups if not bf16 else bf16_copy(ups)
            up = LTX2LatentUpsamplePipeline(vae=pipe.vae, latent_upsampler=u)(latents=video, output_type="latent",
                                                                              return_dict=False)[0]
            rec["up"] = c32(up[0].permute(1, 2, 3, 0).reshape(-1, up.shape[1]))
            stage[0] = 2
            kw = dict(latents=up, audio_latents=audio, height=case["height"], width=case["width"],
                      num_inference_steps=len(S2), noise_scale=S2[0], sigmas=list(S2), guidance_scale=1.0,
                      output_type="np", **common)
            video, audio = pipe(**kw)
    finally:
        del pipe.vae.decode, pipe.audio_vae.decode
    n2 = len(S2) if case["two_stage"] else case["steps"]
    rec["latents"] = rec[f"step{n2 - 1}"].clone()
    rec["frames"] = c32(torch.as_tensor(video[0]))
    rec["audio"] = c32(torch.as_tensor(audio[0]).transpose(0, 1))
    return rec


def errs(ref, got, full_scale):
    ref, got = ref.double(), got.double()
    scale = 1.0 if full_scale else ref.pow(2).mean().sqrt().item()
    d = got - ref
    return dict(max_rel=d.abs().max().item() / scale, rms_rel=d.pow(2).mean().sqrt().item() / scale,
                rms=ref.pow(2).mean().sqrt().item())


def dir_size(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_pipe")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--only", default=None, help="comma-separated cases to make; the others are kept")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    if only and not only <= set(CASES):
        fail(f"unknown cases {sorted(only - set(CASES))}")
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    transformers = shim_transformers()
    from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    parts, configs, transformers, ups, image = build(args.out, args.seed, keep=only is not None)
    index = dict(generator="tools/golden_ltx2_pipe.py", torch=torch.__version__, diffusers=DIFFUSERS_COMMIT,
                 transformers=transformers.__version__, seed=args.seed, width=WIDTH, height=HEIGHT, frames=FRAMES,
                 fps=FPS, max_sequence_length=MAX_LEN, configs=configs, cases={})
    if only:
        with open(os.path.join(args.out, "index.json")) as f:
            index["cases"] = {k: v for k, v in json.load(f)["cases"].items() if k not in only}
        index["image"] = dict(file="model/first_frame.png", width=IMAGE_W, height=IMAGE_H)
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES
    index["image"] = dict(file="model/first_frame.png", width=IMAGE_W, height=IMAGE_H)
    for name, case in CASES.items():
        if only and name not in only:
            continue
        if case["sigmas"] == "distilled":
            case["sigmas"] = list(DISTILLED_SIGMA_VALUES)
        if "kind" in case:
            ref = run_staged(parts, ups, image, case, False)
            b16 = run_staged(parts, ups, image, case, True)
        else:
            ref = run(LTX2Pipeline, parts, case, False)
            b16 = run(LTX2Pipeline, parts, case, True)
        info = dict(case, outputs={})
        for k, v in ref.items():
            if k == "ids":
                continue
            e = errs(v, b16[k], k in ("frames", "audio")) if k in b16 else {}
            info["outputs"][k] = dict(shape=list(v.shape), rms=e.get("rms"), bf16_max_rel=e.get("max_rel"),
                                      bf16_rms_rel=e.get("rms_rel"))
        # the decoders' own float32 noise on the sound: the audio VAE and the vocoder in float64 on the same
        # latents (the random bandwidth extender amplifies its input's rounding ~15x; a C bound on the sound below
        # this would be stricter than the reference itself)
        avae64, voc64 = copy.deepcopy(parts["audio_vae"]).double(), copy.deepcopy(parts["vocoder"]).double()
        mel64 = avae64.decode(ref["audio_vae_in"].double()[None], return_dict=False)[0]
        a64 = voc64(mel64)[0].transpose(0, 1)
        info["outputs"]["audio"]["f32_vs_f64_max"] = (ref["audio"].double() - a64).abs().max().item()
        print(f"{name}: the sound's float32 error against float64 decoders {info['outputs']['audio']['f32_vs_f64_max']:.3g}")
        if "ids" in ref:
            info["n_tokens"] = int((ref["ids"] != 0).sum())
        index["cases"][name] = info
        save_file(ref, os.path.join(args.out, "cases", name + ".safetensors"))
        print(f"{name}: frames {list(ref['frames'].shape)}, audio {list(ref['audio'].shape)}, "
              f"{info.get('n_tokens')} prompt tokens; bf16 latents max {info['outputs']['latents']['bf16_max_rel']:.3g}, "
              f"frames {info['outputs']['frames']['bf16_max_rel']:.3g}, audio {info['outputs']['audio']['bf16_max_rel']:.3g}")
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    size = dir_size(args.out)
    print(f"wrote {args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{size} bytes under {args.out}, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
