#!/usr/bin/env bash
# registry.sh — `cortiq run` and `cortiq imagine` pick the implementation by
# the pack's arch_name: a pack of an arch no entry lists is refused with the
# arch named and the supported ones listed, before any weight is read.
# Usage: bash registry.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)

# a Qwen3 folder relabelled as another model type: the same tensors, an arch run does not know
mkdir -p "$W/llama"
cp "$HERE/../golden/qwen3/qwen3_a/"* "$W/llama/"
sed -i 's/"model_type": *"qwen3"/"model_type": "llama"/' "$W/llama/config.json"
grep -q '"model_type": "llama"' "$W/llama/config.json" || fail "could not relabel the config"
expect 0 "$CQ" convert "$W/llama" -o "$W/llama.cmf" --quiet
expect 1 "$CQ" run "$W/llama.cmf" --prompt "hi" --greedy --max-tokens 2
has err "is a language model of arch 'llama'; cortiq run chats with: qwen3, qwen3_vl, qwen3_vl_text"
# the known arch still runs
expect 0 "$CQ" convert "$HERE/../golden/qwen3/qwen3_a" -o "$W/qwen3.cmf" --quiet
expect 0 "$CQ" run "$W/qwen3.cmf" --prompt "hi" --greedy --max-tokens 2 -q

# a pipeline folder of another class: imagine refuses it and lists what it draws with
P=$W/fpipe
mkdir -p "$P/transformer" "$P/vae" "$P/scheduler" "$P/text_encoder" "$P/tokenizer"
cat >"$P/model_index.json" <<'JSON'
{"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],
 "vae": ["diffusers", "AutoencoderKL"], "text_encoder": ["transformers", "Qwen3ForCausalLM"],
 "tokenizer": ["transformers", "Qwen2Tokenizer"], "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]}
JSON
echo '{"shift": 3.0}' >"$P/scheduler/scheduler_config.json"
cp "$HERE/../golden/qwen3/qwen3_a/config.json" "$HERE/../golden/qwen3/qwen3_a/model.safetensors" "$P/text_encoder/"
cp "$HERE/../golden/qwen3/qwen3_a/tokenizer.json" "$HERE/../golden/qwen3/qwen3_a/tokenizer_config.json" "$P/tokenizer/"
for c in transformer vae; do
    echo '{"_class_name": "X"}' >"$P/$c/config.json"
    cp "$HERE/../golden/qwen3/qwen3_a/model.safetensors" "$P/$c/diffusion_pytorch_model.safetensors"
done
expect 0 "$CQ" convert "$P" -o "$W/f.cmf" --quiet
expect 1 "$CQ" imagine "$W/f.cmf" "a red circle" --size 64x64 --steps 2 -o "$W/f.png"
has err "is a pipeline of arch 'flux'; cortiq imagine draws with: qwen_image21, z_image, qwen_image, qwen_image_edit, qwen_image_edit_plus"
[ -e "$W/f.png" ] && fail "a refused pack wrote f.png"
# an option of one architecture is still checked before the pack is read
expect 2 "$CQ" imagine "$W/f.cmf" "a red circle" --noise-dtype f16
has err "--noise-dtype wants f32 or bf16"

finish "model registry"
