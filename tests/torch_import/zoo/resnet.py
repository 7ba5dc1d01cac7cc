"""torchvision's ResNet style: conv3x3 / conv1x1 helpers, BasicBlock and
Bottleneck (expansion 4, the stride on the 3x3 conv: v1.5) with
BatchNorm2d, ReLU(inplace=True), `out += identity` and a downsample
Sequential (conv1x1 + BatchNorm2d) where the shape changes; the ResNet
stem (7x7 stride-2 conv, BN, ReLU, 3x3 stride-2 max pool), _make_layer,
AdaptiveAvgPool2d((1, 1)), torch.flatten and fc; torchvision's init
(kaiming_normal_ fan_out, BN weight 1 / bias 0). Trained in train mode
(batch statistics, running statistics updated) with SGD, momentum 0.9 and
weight decay, as torchvision's reference recipe.

  resnet_basic       BasicBlock, layers [1, 1], width 16
  resnet_bottleneck  Bottleneck, layers [1, 1], width 8 (32 / 64 out)

Images 3x16x16 (8x8 after the stem conv, 4x4 after the pool), 10 classes,
batch 16."""

import torch
import torch.nn as nn
from torch import Tensor

from zoo import Case


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1,
            dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion: int = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        # Both self.conv1 and self.downsample layers downsample the input when stride != 1
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out


class Bottleneck(nn.Module):
    # The stride for downsampling is on the 3x3 convolution (self.conv2):
    # ResNet V1.5, as torchvision.
    expansion: int = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        # Both self.conv2 and self.downsample layers downsample the input when stride != 1
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)

        out = self.conv3(out)
        out = self.bn3(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None,
                 base_planes=64):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer

        self.inplanes = base_planes
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False] * (len(layers) - 1)
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        stages = []
        for i, n in enumerate(layers):
            stride = 1 if i == 0 else 2
            dilate = False if i == 0 else replace_stride_with_dilation[i - 1]
            stages.append(self._make_layer(block, base_planes * 2 ** i, n, stride=stride,
                                           dilate=dilate))
        # layer1, layer2, ... as torchvision names them
        for i, stage in enumerate(stages):
            setattr(self, f"layer{i + 1}", stage)
        self.num_stages = len(stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base_planes * 2 ** (len(layers) - 1) * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

        # Zero-initialize the last BN in each residual branch, so that the
        # residual branch starts with zeros and each block behaves like an identity.
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )

        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, self.groups,
                            self.base_width, previous_dilation, norm_layer))
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))

        return nn.Sequential(*layers)

    def _forward_impl(self, x: Tensor) -> Tensor:
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)

        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)

        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._forward_impl(x)


def image_batch(batch, classes, seed, size=16):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 3, size, size, generator=g),
            torch.randint(0, classes, (batch,), generator=g))


def sgd(model, lr=0.02, momentum=0.9, weight_decay=1e-4):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum,
                           weight_decay=weight_decay)


def resnet_case(name, block, base_planes, what):
    torch.manual_seed(0)
    model = ResNet(block, [1, 1], num_classes=10, base_planes=base_planes)
    images, labels = image_batch(16, 10, seed=5)
    return Case(name=name, family="resnet", module=model, inputs=(images,), target=labels,
                loss=nn.CrossEntropyLoss(), optimizer=sgd, what=what)


def make():
    return [
        resnet_case("resnet_basic", BasicBlock, 16,
                    "torchvision ResNet, BasicBlock: conv3x3, BatchNorm2d (train), "
                    "ReLU(inplace), out += identity, downsample, AdaptiveAvgPool2d, fc"),
        resnet_case("resnet_bottleneck", Bottleneck, 8,
                    "torchvision ResNet, Bottleneck (expansion 4, stride on the 3x3)"),
    ]
