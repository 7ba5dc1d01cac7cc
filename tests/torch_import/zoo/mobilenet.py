"""torchvision's MobileNetV2 style: _make_divisible, Conv2dNormActivation
(Conv2d without bias, BatchNorm2d, ReLU6(inplace=True), padding
(kernel - 1) // 2), InvertedResidual (1x1 expand unless expand_ratio is 1,
3x3 depthwise conv with groups = channels, 1x1 linear projection + BN, the
residual when stride is 1 and the channels match), features Sequential,
F.adaptive_avg_pool2d(x, (1, 1)) + torch.flatten, classifier Sequential
(Dropout, Linear), torchvision's init; train mode, SGD with momentum.

A small inverted_residual_setting (t, c, n, s): [1, 8, 1, 1], [4, 12, 2, 2],
[4, 16, 1, 2], first channel 8, last 64; images 3x16x16 (8x8 after the
stem, 2x2 at the end), 10 classes, batch 16, dropout 0."""

from typing import Callable, List, Optional

import torch
from torch import Tensor, nn

from zoo import Case
from zoo.resnet import image_batch


def _make_divisible(v: float, divisor: int, min_value: Optional[int] = None) -> int:
    """Every layer's channel count divisible by `divisor` (the original
    TensorFlow repository's rule)."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    # Make sure that round down does not go down by more than 10%.
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Conv2dNormActivation(torch.nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                 stride: int = 1, padding: Optional[int] = None, groups: int = 1,
                 norm_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.BatchNorm2d,
                 activation_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.ReLU,
                 dilation: int = 1, inplace: Optional[bool] = True,
                 bias: Optional[bool] = None) -> None:
        if padding is None:
            padding = (kernel_size - 1) // 2 * dilation
        if bias is None:
            bias = norm_layer is None
        layers = [torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                                  dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            params = {} if inplace is None else {"inplace": inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        self.out_channels = out_channels


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int,
                 norm_layer: Optional[Callable[..., nn.Module]] = None) -> None:
        super().__init__()
        self.stride = stride
        if stride not in [1, 2]:
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")

        if norm_layer is None:
            norm_layer = nn.BatchNorm2d

        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup

        layers: List[nn.Module] = []
        if expand_ratio != 1:
            # pw
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1,
                                               norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers.extend([
            # dw
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim,
                                 norm_layer=norm_layer, activation_layer=nn.ReLU6),
            # pw-linear
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ])
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: Tensor) -> Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        else:
            return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: Optional[List[List[int]]] = None,
                 round_nearest: int = 8, block: Optional[Callable[..., nn.Module]] = None,
                 norm_layer: Optional[Callable[..., nn.Module]] = None,
                 dropout: float = 0.2, input_channel: int = 32,
                 last_channel: int = 1280) -> None:
        super().__init__()
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d

        if inverted_residual_setting is None:
            inverted_residual_setting = [
                # t, c, n, s
                [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1],
            ]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError("inverted_residual_setting should be a non-empty list of 4-lists")

        # building first layer
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features: List[nn.Module] = [
            Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                 activation_layer=nn.ReLU6)]
        # building inverted residual blocks
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(block(input_channel, output_channel, stride, expand_ratio=t,
                                      norm_layer=norm_layer))
                input_channel = output_channel
        # building last several layers
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer,
                                             activation_layer=nn.ReLU6))
        # make it nn.Sequential
        self.features = nn.Sequential(*features)

        # building classifier
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(self.last_channel, num_classes),
        )

        # weight initialization
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x: Tensor) -> Tensor:
        x = self.features(x)
        # Cannot use "squeeze" as batch-size can be 1
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._forward_impl(x)


def make():
    torch.manual_seed(0)
    model = MobileNetV2(num_classes=10, dropout=0.0, input_channel=8, last_channel=64,
                        inverted_residual_setting=[[1, 8, 1, 1], [4, 12, 2, 2], [4, 16, 1, 2]])
    images, labels = image_batch(16, 10, seed=6)
    return [Case(
        name="mobilenet_v2", family="mobilenet", module=model, inputs=(images,), target=labels,
        loss=nn.CrossEntropyLoss(),
        optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9,
                                            weight_decay=4e-5),
        what="torchvision MobileNetV2: InvertedResidual (1x1 expand, depthwise 3x3 "
             "groups=C, ReLU6, 1x1 project, residual), BatchNorm2d (train)")]
