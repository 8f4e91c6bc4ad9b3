"""The real models of the ONNX import's tests, built small with random
weights (nothing downloaded): torchvision's resnet18, mobilenet_v3_small
and a 2-layer VisionTransformer, transformers' GPT2LMHeadModel and
BertForSequenceClassification from small configs, an nn.TransformerEncoder
classifier and an nn.LSTM classifier. tests/onnx_real_models.py exports
and checks them; python/tests/test_torch_models.py trains them through
ts.training_model(module). Needs torch (and torchvision or transformers
for their models) only."""
import torch

MODELS = ["resnet18", "mobilenet_v3_small", "vit", "gpt2", "bert", "transformer_encoder", "lstm"]
BATCH = 2


def build(name):
    """(module, {input name: example tensor}, labels tensor): the module in
    training mode with every dropout probability 0, and labels for its
    first output (per sample, or per token for a language model)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    image = {"x": torch.randn(BATCH, 3, 64, 64, generator=g)}
    classes = torch.randint(0, 10, (BATCH,), generator=g)
    tokens = {"input_ids": torch.randint(0, 100, (BATCH, 8), generator=g)}
    if name == "resnet18":
        import torchvision
        m, inputs, labels = torchvision.models.resnet18(num_classes=10), image, classes
    elif name == "mobilenet_v3_small":
        import torchvision
        m = torchvision.models.mobilenet_v3_small(num_classes=10, dropout=0.0)
        inputs, labels = image, classes
    elif name == "vit":
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2,
                              hidden_dim=32, mlp_dim=64, num_classes=10)
        inputs, labels = image, classes
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        class GPT2(GPT2LMHeadModel):  # the logits, as a tensor; the same names
            def forward(self, input_ids):  # without a mask, the export meets aten::diff
                return super().forward(input_ids=input_ids,
                                       attention_mask=torch.ones_like(input_ids)).logits

        m = GPT2(GPT2Config(vocab_size=100, n_positions=16, n_embd=32, n_layer=2,
                                       n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0, use_cache=False,
                                  bos_token_id=0, eos_token_id=0, attn_implementation="eager"))
        inputs, labels = tokens, torch.randint(0, 100, (BATCH, 8), generator=g)
    elif name == "bert":
        from transformers import BertConfig, BertForSequenceClassification

        class Bert(BertForSequenceClassification):
            def forward(self, input_ids):
                return super().forward(input_ids=input_ids,
                                       attention_mask=torch.ones_like(input_ids)).logits

        m = Bert(BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=16, num_labels=3,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            attn_implementation="eager"))
        inputs, labels = tokens, torch.randint(0, 3, (BATCH,), generator=g)
    elif name == "transformer_encoder":
        m = EncoderClassifier()
        inputs, labels = {"x": torch.randn(BATCH, 8, 32, generator=g)}, classes % 5
    elif name == "lstm":
        m = LSTMClassifier()
        inputs, labels = {"x": torch.randn(BATCH, 8, 16, generator=g)}, classes % 5
    else:
        raise ValueError(name)
    return m.train(), inputs, labels


class EncoderClassifier(torch.nn.Module):
    """nn.TransformerEncoder (2 layers) and a linear head on the mean."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.encoder(x).mean(1))


class LSTMClassifier(torch.nn.Module):
    """nn.LSTM and a linear head on the last step."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])
