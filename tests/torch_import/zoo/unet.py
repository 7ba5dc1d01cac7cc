"""A diffusion UNet in diffusers' UNet2DModel style: ResnetBlock2D
(GroupNorm, SiLU, 3x3 Conv2d, the time embedding projected and added as
[:, :, None, None], a 1x1 conv_shortcut when the channels change, the
output divided by output_scale_factor), DownBlock2D (resnets, then a
Downsample2D: 3x3 conv with stride 2) returning its output states,
UNetMidBlock2D without attention, UpBlock2D (torch.cat of each popped skip
on the channels before each resnet, then Upsample2D: F.interpolate(
scale_factor=2.0, mode="nearest") + 3x3 conv), conv_norm_out / conv_act /
conv_out; TimestepEmbedding (linear_1, SiLU, linear_2); the epsilon
objective F.mse_loss(model(noisy, t), noise) with AdamW as diffusers'
train_unconditional.py sets it up.

  unet             the sinusoidal timestep features are computed outside
                   the model (an input of shape (B, 32));
  unet_timesteps   forward(sample, timesteps) as diffusers: Timesteps
                   (get_timestep_embedding: torch.exp of an arange,
                   timesteps[:, None] * freqs, torch.cat of torch.sin and
                   torch.cos) inside the model (sin / cos of a graph value).

Sizes: samples 3x16x16, block_out_channels (16, 32), one layer per down
block, 8 groups, time embedding 32 -> 64, batch 8."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo import Case


def get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False,
                           downscale_freq_shift=1, scale=1, max_period=10000):
    """Sinusoidal embeddings of 1-D timesteps, as in Denoising Diffusion
    Probabilistic Models."""
    assert len(timesteps.shape) == 1, "Timesteps should be a 1d-array"

    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(
        start=0, end=half_dim, dtype=torch.float32, device=timesteps.device)
    exponent = exponent / (half_dim - downscale_freq_shift)

    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    return emb


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels = num_channels
        self.flip_sin_to_cos = flip_sin_to_cos
        self.downscale_freq_shift = downscale_freq_shift
        self.scale = scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels,
                                      flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift,
                                      scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, act_fn="silu", out_dim=None):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.SiLU()
        time_embed_dim_out = out_dim if out_dim is not None else time_embed_dim
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim_out)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        sample = self.linear_2(sample)
        return sample


class ResnetBlock2D(nn.Module):
    def __init__(self, *, in_channels, out_channels=None, conv_shortcut=False, dropout=0.0,
                 temb_channels=512, groups=32, groups_out=None, pre_norm=True, eps=1e-6,
                 non_linearity="swish", time_embedding_norm="default", output_scale_factor=1.0,
                 use_in_shortcut=None, conv_shortcut_bias=True):
        super().__init__()
        self.pre_norm = True
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut
        self.output_scale_factor = output_scale_factor
        self.time_embedding_norm = time_embedding_norm

        if groups_out is None:
            groups_out = groups

        self.norm1 = torch.nn.GroupNorm(num_groups=groups, num_channels=in_channels, eps=eps,
                                        affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)

        if temb_channels is not None:
            self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        else:
            self.time_emb_proj = None

        self.norm2 = torch.nn.GroupNorm(num_groups=groups_out, num_channels=out_channels,
                                        eps=eps, affine=True)
        self.dropout = torch.nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()

        self.use_in_shortcut = self.in_channels != out_channels if use_in_shortcut is None \
            else use_in_shortcut
        self.conv_shortcut = None
        if self.use_in_shortcut:
            self.conv_shortcut = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1,
                                           padding=0, bias=conv_shortcut_bias)

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor

        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)

        if self.time_emb_proj is not None:
            temb = self.nonlinearity(temb)
            temb = self.time_emb_proj(temb)[:, :, None, None]

        if temb is not None and self.time_embedding_norm == "default":
            hidden_states = hidden_states + temb

        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)

        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)

        output_tensor = (input_tensor + hidden_states) / self.output_scale_factor
        return output_tensor


class Downsample2D(nn.Module):
    def __init__(self, channels, use_conv=False, out_channels=None, padding=1, name="conv"):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.padding = padding
        stride = 2
        self.name = name
        if use_conv:
            conv = nn.Conv2d(self.channels, self.out_channels, kernel_size=3, stride=stride,
                             padding=padding)
        else:
            assert self.channels == self.out_channels
            conv = nn.AvgPool2d(kernel_size=stride, stride=stride)
        self.conv = conv

    def forward(self, hidden_states):
        assert hidden_states.shape[1] == self.channels
        if self.use_conv and self.padding == 0:
            pad = (0, 1, 0, 1)
            hidden_states = F.pad(hidden_states, pad, mode="constant", value=0)
        hidden_states = self.conv(hidden_states)
        return hidden_states


class Upsample2D(nn.Module):
    def __init__(self, channels, use_conv=False, use_conv_transpose=False, out_channels=None,
                 name="conv", interpolate=True):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.use_conv_transpose = use_conv_transpose
        self.name = name
        self.interpolate = interpolate
        conv = None
        if use_conv_transpose:
            conv = nn.ConvTranspose2d(channels, self.out_channels, kernel_size=4, stride=2,
                                      padding=1)
        elif use_conv:
            conv = nn.Conv2d(self.channels, self.out_channels, kernel_size=3, padding=1)
        self.conv = conv

    def forward(self, hidden_states, output_size=None):
        assert hidden_states.shape[1] == self.channels

        if self.use_conv_transpose:
            return self.conv(hidden_states)

        # upsample_nearest_nhwc has no bfloat16 kernel: upcast
        dtype = hidden_states.dtype
        if dtype == torch.bfloat16:
            hidden_states = hidden_states.to(torch.float32)

        # upsample_nearest_nhwc fails with large batch sizes
        if hidden_states.shape[0] >= 64:
            hidden_states = hidden_states.contiguous()

        # if `output_size` is passed we force the interpolation output
        # size and do not make use of `scale_factor=2`
        if self.interpolate:
            if output_size is None:
                hidden_states = F.interpolate(hidden_states, scale_factor=2.0, mode="nearest")
            else:
                hidden_states = F.interpolate(hidden_states, size=output_size, mode="nearest")

        if dtype == torch.bfloat16:
            hidden_states = hidden_states.to(dtype)

        if self.use_conv:
            hidden_states = self.conv(hidden_states)

        return hidden_states


class DownBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=1,
                 resnet_eps=1e-6, resnet_groups=32, output_scale_factor=1.0,
                 add_downsample=True, downsample_padding=1):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(
                in_channels=in_channels, out_channels=out_channels, temb_channels=temb_channels,
                eps=resnet_eps, groups=resnet_groups, dropout=dropout,
                output_scale_factor=output_scale_factor))
        self.resnets = nn.ModuleList(resnets)

        if add_downsample:
            self.downsamplers = nn.ModuleList([Downsample2D(
                out_channels, use_conv=True, out_channels=out_channels,
                padding=downsample_padding, name="op")])
        else:
            self.downsamplers = None

    def forward(self, hidden_states, temb=None):
        output_states = ()

        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states = output_states + (hidden_states,)

        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)

        return hidden_states, output_states


class UNetMidBlock2D(nn.Module):
    """The middle block with add_attention=False: resnets only."""

    def __init__(self, in_channels, temb_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6,
                 resnet_groups=32, output_scale_factor=1.0):
        super().__init__()
        resnets = [ResnetBlock2D(in_channels=in_channels, out_channels=in_channels,
                                 temb_channels=temb_channels, eps=resnet_eps,
                                 groups=resnet_groups, dropout=dropout,
                                 output_scale_factor=output_scale_factor)]
        for _ in range(num_layers):
            resnets.append(ResnetBlock2D(in_channels=in_channels, out_channels=in_channels,
                                         temb_channels=temb_channels, eps=resnet_eps,
                                         groups=resnet_groups, dropout=dropout,
                                         output_scale_factor=output_scale_factor))
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states, temb=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for resnet in self.resnets[1:]:
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class UpBlock2D(nn.Module):
    def __init__(self, in_channels, prev_output_channel, out_channels, temb_channels,
                 dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_groups=32,
                 output_scale_factor=1.0, add_upsample=True):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(
                in_channels=resnet_in_channels + res_skip_channels, out_channels=out_channels,
                temb_channels=temb_channels, eps=resnet_eps, groups=resnet_groups,
                dropout=dropout, output_scale_factor=output_scale_factor))
        self.resnets = nn.ModuleList(resnets)

        if add_upsample:
            self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True,
                                                        out_channels=out_channels)])
        else:
            self.upsamplers = None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None):
        for resnet in self.resnets:
            # pop res hidden states
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)

        return hidden_states


class UNet2DModel(nn.Module):
    def __init__(self, sample_size=16, in_channels=3, out_channels=3, freq_shift=0,
                 flip_sin_to_cos=True, block_out_channels=(16, 32), layers_per_block=1,
                 downsample_padding=1, dropout=0.0, norm_num_groups=8, norm_eps=1e-5,
                 timestep_features_outside=False):
        super().__init__()
        self.sample_size = sample_size
        time_embed_dim = block_out_channels[0] * 4
        timestep_input_dim = block_out_channels[0] * 2

        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3,
                                 padding=(1, 1))

        # time
        self.timestep_input_dim = timestep_input_dim
        self.time_proj = None if timestep_features_outside else \
            Timesteps(timestep_input_dim, flip_sin_to_cos, freq_shift)
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)

        self.down_blocks = nn.ModuleList([])
        self.mid_block = None
        self.up_blocks = nn.ModuleList([])

        # down
        output_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            self.down_blocks.append(DownBlock2D(
                num_layers=layers_per_block, in_channels=input_channel,
                out_channels=output_channel, temb_channels=time_embed_dim,
                add_downsample=not is_final_block, resnet_eps=norm_eps,
                resnet_groups=norm_num_groups, downsample_padding=downsample_padding,
                dropout=dropout))

        # mid
        self.mid_block = UNetMidBlock2D(in_channels=block_out_channels[-1],
                                        temb_channels=time_embed_dim, dropout=dropout,
                                        resnet_eps=norm_eps, resnet_groups=norm_num_groups)

        # up
        reversed_block_out_channels = list(reversed(block_out_channels))
        output_channel = reversed_block_out_channels[0]
        for i in range(len(block_out_channels)):
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            is_final_block = i == len(block_out_channels) - 1
            self.up_blocks.append(UpBlock2D(
                num_layers=layers_per_block + 1, in_channels=input_channel,
                out_channels=output_channel, prev_output_channel=prev_output_channel,
                temb_channels=time_embed_dim, add_upsample=not is_final_block,
                resnet_eps=norm_eps, resnet_groups=norm_num_groups, dropout=dropout))

        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0],
                                          num_groups=norm_num_groups, eps=norm_eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep):
        # 1. time
        if self.time_proj is not None:
            t_emb = self.time_proj(timestep)
        else:
            t_emb = timestep  # the sinusoidal features, computed by the caller
        t_emb = t_emb.to(dtype=self.dtype)
        emb = self.time_embedding(t_emb)

        # 2. pre-process
        sample = self.conv_in(sample)

        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples

        # 4. mid
        sample = self.mid_block(sample, emb)

        # 5. up
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            sample = upsample_block(sample, res_samples, emb)

        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return sample

    @property
    def dtype(self):
        return next(self.parameters()).dtype


def unet_case(name, outside, what, **expect):
    torch.manual_seed(0)
    model = UNet2DModel(timestep_features_outside=outside)
    g = torch.Generator().manual_seed(7)
    clean = torch.randn(8, 3, 16, 16, generator=g)
    noise = torch.randn(8, 3, 16, 16, generator=g)
    timesteps = torch.randint(0, 1000, (8,), generator=g)
    # DDPM's linear beta schedule: noisy = sqrt(abar) x + sqrt(1 - abar) noise
    alphas_cumprod = torch.cumprod(1.0 - torch.linspace(1e-4, 0.02, 1000), dim=0)
    abar = alphas_cumprod[timesteps][:, None, None, None]
    noisy = abar.sqrt() * clean + (1 - abar).sqrt() * noise
    if outside:
        t_input = get_timestep_embedding(timesteps, model.timestep_input_dim,
                                         flip_sin_to_cos=True, downscale_freq_shift=0)
    else:
        t_input = timesteps.float()
    return Case(
        name=name, family="unet", module=model, inputs=(noisy, t_input), target=noise,
        loss=F.mse_loss,
        optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.95, 0.999),
                                              weight_decay=1e-6, eps=1e-8),
        what=what, **expect)


def make():
    return [
        unet_case("unet", True,
                  "diffusers UNet2DModel: ResnetBlock2D (GroupNorm, SiLU, conv, temb add), "
                  "stride-2 conv down, nearest F.interpolate up, torch.cat skips, MSE on noise"),
        unet_case("unet_timesteps", False,
                  "the UNet with diffusers' sinusoidal Timesteps inside (torch.sin / torch.cos "
                  "of the timesteps input)"),
    ]
